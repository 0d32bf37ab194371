//! The sessionless era on the same endpoint: MCP 2026-07-28 agents next to 2025-11-25 ones (2026-07-28 basic
//! §"Versioning" "Backward compatibility", transports §"Streamable HTTP").
//!
//! Owns: which `POST`s belong to this era ([`is_modern`]), and serving them: the checks of [`checks`] (`_meta`,
//! then headers against the body, then the version), `server/discover` ([`discover`]), `subscriptions/listen`
//! ([`listen`]), the router's methods answered JSON or SSE ([`call`]) and shaped for the era ([`shape`]).
//!
//! Rules:
//! - Dispatch (`post.rs` asks [`is_modern`] after reading the body): a message is of this era when its
//!   `params._meta` carries `io.modelcontextprotocol/protocolVersion`, or its `MCP-Protocol-Version` names a
//!   2026-07-28-era version, and no live session goes with it (a live session keeps the session era). So a
//!   2025-11-25 `initialize` (which carries neither) starts a session as before, and an `initialize` that names
//!   this era is a removed method (404).
//! - Every request is served without a session: what a session carried is taken from the request itself —
//!   the principal authenticated on it, the client capabilities of its own `_meta` (never inferred from earlier
//!   requests) — and the agent's backend sessions are keyed on its principal (`front::caller`): one backend session
//!   per (principal, backend), in the same bounded table as session-era agents'.
//! - Methods: `server/discover`, `subscriptions/listen`, `tools/list`, `tools/call`, `prompts/list`,
//!   `prompts/get`, `resources/list`, `resources/templates/list`, `resources/read`, `completion/complete`, and the
//!   tasks extension's `tasks/get`, `tasks/update`, `tasks/cancel` (the router's tasks). Anything else
//!   (`initialize`, `ping`, `logging/setLevel`, `resources/subscribe`, `tasks/result`, `tasks/list`, unknown) is 404 with
//!   `-32601`, before any other check. `notifications/cancelled` is accepted (202) and has no effect: over HTTP a request is cancelled
//!   by closing its stream; any other notification is 404.
//! - The request's client `_meta` keys (version, capabilities, client info, log level) describe the agent's hop and
//!   stay at the front; the rest of `params` goes to the router as sent.
//! - With traces on, `server/discover` and every routed request is one SERVER span, as in the session era (design
//!   §8), continuing the agent's `traceparent` from `params._meta` or, failing that, the HTTP header.
//! - Agents of this era are never sent a request: their backend sessions declare no client capabilities, and a
//!   backend that asks anyway is refused with [`REFUSAL`]. A 2026-07-28 backend's `input_required` results reach
//!   them with a `requestState` of the gateway's, and their retries continue the call (the router's
//!   `continuation`; the caller is marked `Caller::sessionless`).
//!
//! Must not know: backends' wire formats, backend sessions beyond the key it hands the router.

mod call;
mod checks;
mod discover;
mod events;
pub mod listen;
mod shape;

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::caller::{CallerScope, Requester};
use super::error::FrontError;
use super::post::well_formed;
use super::{Front, http};
use crate::mcp::jsonrpc;
use crate::mcp::message::{Incoming, Message, Request};
use crate::mcp::method::Method;
use crate::mcp::{PROTOCOL_VERSION_HEADER, is_modern_version, meta};
use crate::telemetry::trace::{ServerRequest, ServerSpan, SpanContext, TRACEPARENT, TRACESTATE};

/// What a backend that sends a server-to-client request during a 2026-07-28 agent's request is told.
pub const REFUSAL: &str = "the agent speaks MCP 2026-07-28, which has no server-to-client requests, and this gateway \
     does not yet turn them into input_required results; the request was refused";

/// Whether this era's agents are served `method` through the router.
fn routed(method: &Method) -> bool {
    matches!(
        method,
        Method::ToolsList
            | Method::ToolsCall
            | Method::PromptsList
            | Method::PromptsGet
            | Method::ResourcesList
            | Method::ResourcesTemplatesList
            | Method::ResourcesRead
            | Method::CompletionComplete
            | Method::TasksGet
            | Method::TasksUpdate
            | Method::TasksCancel
    )
}

/// Whether a `POST`ed message is of the 2026-07-28 era (see the module rules; the caller checks for a live
/// session).
pub(super) fn is_modern(incoming: &Incoming, headers: &HeaderMap) -> bool {
    incoming.meta_names_version || names_modern_version(headers)
}

/// Whether the request's `MCP-Protocol-Version` is one of the 2026-07-28 era.
pub(super) fn names_modern_version(headers: &HeaderMap) -> bool {
    let version = headers.get(HeaderName::from_static(PROTOCOL_VERSION_HEADER));
    version.and_then(|version| version.to_str().ok()).is_some_and(is_modern_version)
}

/// A sessionless `POST`, as admitted: the backend of `/mcp/{backend}`, and who sent it.
pub(super) struct ModernPost<'a> {
    pub(super) backend: Option<String>,
    pub(super) requester: Requester<'a>,
}

/// The `_meta` keys that describe the agent's hop to the gateway, not the gateway's to a backend.
const CLIENT_META: [&str; 4] = [meta::PROTOCOL_VERSION, meta::CLIENT_CAPABILITIES, meta::CLIENT_INFO, meta::LOG_LEVEL];

/// `params` without [`CLIENT_META`] (a backend hears the gateway's own version and capabilities, if any; the rest of
/// `_meta` — progress token, trace context, idempotency key — goes on).
fn without_client_meta(mut params: Value) -> Value {
    if let Some(request_meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        request_meta.retain(|key, _| !CLIENT_META.contains(&key.as_str()));
    }
    params
}

impl Front {
    /// The SERVER span of request `id` when traces are on, as the session era's, without a session: the
    /// agent's context from `params._meta`, else from its HTTP `traceparent` and `tracestate` headers; the version
    /// from `_meta`.
    fn server_span(&self, post: &ModernPost<'_>, id: &Value, method: &str, params: &Value) -> Option<ServerSpan> {
        let tracer = self.tracer.as_ref()?;
        let header = |name| post.requester.headers.get(name).and_then(|value| value.to_str().ok());
        let from_headers = SpanContext::from_fields(header(TRACEPARENT), header(TRACESTATE));
        let request = ServerRequest { method, id, params, session: None, peer: post.requester.peer };
        let mut span = tracer.server_span_or(&request, from_headers);
        let version = params.get("_meta").and_then(|request_meta| request_meta.get(meta::PROTOCOL_VERSION));
        if let Some(version) = version.and_then(Value::as_str) {
            span.sessionless(version);
        }
        Some(span)
    }

    /// Serves one 2026-07-28 message.
    pub(super) async fn serve_modern(
        self: &Arc<Self>,
        post: ModernPost<'_>,
        incoming: Incoming,
    ) -> Result<Response, FrontError> {
        let Request { id, method, params } = match well_formed(incoming)? {
            Message::Request(request) => request,
            Message::Notification { method: Method::Cancelled, .. } => return Ok(StatusCode::ACCEPTED.into_response()),
            Message::Notification { method, .. } => {
                return Err(FrontError::NoSuchMethod { id: None, method: method.into_name() });
            }
            Message::Response { id, .. } => return Err(FrontError::UnaskedResponse { id }),
            Message::Invalid { .. } => return Err(FrontError::NotAMessage),
        };
        if method != Method::ServerDiscover && method != Method::SubscriptionsListen && !routed(&method) {
            // Before any other check: an agent probing for a method learns only that it does not exist.
            return Err(FrontError::NoSuchMethod { id: Some(id), method: method.into_name() });
        }
        let request = checks::admit(&id, &method, &params, post.requester.headers)?;
        if method == Method::ServerDiscover {
            let span = self.server_span(&post, &id, method.as_str(), &params);
            let reply = jsonrpc::result(&id, self.discover());
            span.into_iter().for_each(|span| span.end(&reply));
            return Ok(http::json(StatusCode::OK, &reply));
        }
        let caller = post.requester.caller(&id, CallerScope::Sessionless)?;
        let _allowance = self.admit_by_limits(&caller, &method).await?;
        if method == Method::SubscriptionsListen {
            // Boxed: inline, a subscription's future would size every modern request's.
            return Box::pin(self.listen(caller, post.backend, &params)).await;
        }
        let span = self.server_span(&post, &id, method.as_str(), &params);
        let params = without_client_meta(params);
        let call = call::Call { caller, backend: post.backend, method, params, request, span };
        Ok(self.serve_call(call, super::post::accepts_event_stream(post.requester.headers)).await)
    }
}
