//! The front's error table: every way the agent-facing endpoint refuses a request, and the HTTP answer each one
//! gets (MCP transports §"Sending Messages to the Server": a refused message's body MAY be a JSON-RPC error with
//! no id).
//!
//! Owns: [`FrontError`] and its one `match` deciding, per case, the HTTP status, the JSON-RPC code, the id, the
//! message the agent reads and any extra header (`Connection: close` after an unread body, `Retry-After` when the
//! revocation list is full, the ledger is not open yet or a limit refused the request, `WWW-Authenticate` when
//! credentials are refused — with `auth::AuthError`'s status: 401, 403 `insufficient_scope`, 400 `invalid_request`). Handlers and extractors
//! return a `FrontError`; none builds an error answer itself.
//! The operator's console API (`/admin/api/…`) answers its refusals from the same table, in the same shape.
//!
//! Rules: the messages are sentences an agent (or an LLM) can act on; a session that cannot be used is 404 for
//! every reason (malformed, forged, expired, foreign, revoked — MCP 2025-11-25 §A1.6) and only the text tells
//! them apart; the id is the request's when it is known and valid, else none. The sessionless era's refusals
//! (MCP 2026-07-28 transports §"Standard MCP Request Headers", basic §"Versioning") always carry the era's JSON-RPC
//! error body, since a bare 4xx would make a dual-era client fall back to `initialize`: `-32020` for headers
//! that do not match the body or carry a session, `-32602` for a bad `_meta`, `-32022` (with
//! `data {supported, requested}`) for an unserved version, all 400; an unknown or removed method 404/`-32601`;
//! a `GET`/`DELETE` 405. [`modern_error_status`] gives the status of the JSON-RPC errors such a request is
//! answered with.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::access::RefusedWith;
use super::guard::Refusal;
use super::http;
use super::revocations::RevokeError;
use super::session::SealError;
use crate::auth::AuthError;
use crate::mcp::{MODERN_PROTOCOL_VERSIONS, jsonrpc};
use crate::router::idempotency::KeyRefusal;
use crate::router::inspect::InspectError;
use crate::router::limits::Refusal as LimitRefusal;
use crate::router::{DecisionRefused, RefusalKind};

/// Why the front refused a request.
#[derive(Debug)]
pub enum FrontError {
    /// A header check of [`super::guard`] failed.
    Refused(Refusal),
    /// The request's credentials were refused (or missing); `challenge` is its `WWW-Authenticate` value.
    Unauthenticated { error: AuthError, challenge: String },
    /// `/mcp/{backend}` names no configured backend.
    NoSuchBackend,
    /// A request other than `initialize` came without `MCP-Session-Id`.
    NoSession,
    /// The session id cannot be used; the text says why (malformed, forged, expired, foreign, deleted).
    UnusableSession(&'static str),
    /// `GET` with a `Last-Event-ID` that names no stream this replica still keeps.
    NoSuchStream,
    /// The body was not declared `application/json`.
    BodyNotJson,
    /// The body is larger than `max_body`.
    BodyTooLarge { max_body: usize },
    /// The body did not arrive within `body_timeout`.
    BodyIncomplete { body_timeout: Duration },
    /// The body broke off or could not be decoded.
    BodyUnreadable(axum::Error),
    /// The body is not JSON.
    NotJson(serde_json::Error),
    /// The body is a JSON-RPC batch.
    Batch,
    /// The message lacks `"jsonrpc": "2.0"`; `id` is its id when that is a valid one.
    NotJsonRpc { id: Option<Value> },
    /// The message is neither a request, a notification nor a response.
    NotAMessage,
    /// The `Idempotency-Key` header of request `id` is malformed.
    BadIdempotencyKey { id: Value, refusal: KeyRefusal },
    /// A `DELETE` the revocation list could not take.
    NotDeleted(RevokeError),
    /// An `initialize` (request `id`) refused because the revocation list is full.
    NoRoomForSession { id: Value, cause: RevokeError },
    /// The operating system's random source failed while `initialize` (request `id`) made a session id.
    NoRandom { id: Value },
    /// The session of `initialize` (request `id`) cannot be sealed into an id.
    NotSealed { id: Value, cause: SealError },
    /// The principal already has `max` requests or streams of the MCP endpoint in flight
    /// (`max_connections_per_principal`).
    TooManyRequests { max: usize },
    /// Request `id` (not a tool call) was refused by a `[[limits]]` entry with `methods = ["*"]`.
    Limited { id: Value, refusal: Box<LimitRefusal> },
    /// The agent session already holds `max` standalone streams (`max_streams_per_session`).
    TooManyStreams { max: usize },
    /// The operator's console was asked by an authenticated caller that is not an administrator.
    NotAdmin,
    /// The approvals page was asked by an authenticated caller that is neither an approver nor an administrator,
    /// or a decision by a reader who may not decide.
    NotApprover,
    /// A decision came without a valid form token (`x-csrf-token`) of its decider.
    NoFormToken,
    /// A decision's body is not `{key, decision, note}` with a valid key and decision.
    BadDecision(String),
    /// The router refused the decision (not an approver, the caller's own call, not awaiting, the ledger).
    Decision(DecisionRefused),
    /// An approval link's ticket is not this gateway's, or its request is gone.
    BadLinkTicket,
    /// An approval link whose request was decided (`by`) or expired: it served once.
    LinkUsed { state: &'static str, by: Option<String> },
    /// A query parameter of the console API is unknown, repeated or out of range.
    BadAdminQuery { parameter: String, expected: String },
    /// The console API has no such resource.
    NoSuchAdminResource,
    /// The console's question could not be answered (a bad outcome filter, or the ledger cannot be read).
    Inspect(InspectError),
    /// 2026-07-28: a `GET` or `DELETE` without a session; that era has no standalone stream and nothing to end.
    NoStreamsWithoutSessions,
    /// 2026-07-28: request `id`'s headers do not match its body, or carry a session (`-32020`).
    HeaderMismatch { id: Value, why: String },
    /// 2026-07-28: request `id`'s `_meta` lacks a required key, or a value of its `_meta` or params is bad
    /// (`-32602`).
    BadParams { id: Value, why: String },
    /// 2026-07-28: request `id` asks for a protocol version the gateway does not serve (`-32022`).
    UnsupportedVersion { id: Value, requested: String },
    /// 2026-07-28: a method the era does not have (removed, or never defined); `id` is `None` for a notification.
    NoSuchMethod { id: Option<Value>, method: String },
    /// 2026-07-28: a JSON-RPC response was POSTed; servers of that era send clients no requests.
    UnaskedResponse { id: Value },
    /// The gateway is still waiting for its call ledger (a `store` it cannot reach yet) and serves nothing; the
    /// next attempt is in `retry_after` seconds.
    LedgerNotOpen { store: &'static str, retry_after: u64 },
}

/// The answer to a decision the router refused.
fn decision_refused(refused: DecisionRefused) -> Answer {
    let status = match refused.kind() {
        RefusalKind::NotAllowed => StatusCode::FORBIDDEN,
        RefusalKind::NoSuchRequest => StatusCode::NOT_FOUND,
        RefusalKind::AlreadyDecided => StatusCode::CONFLICT,
        RefusalKind::Invalid => StatusCode::BAD_REQUEST,
        RefusalKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    };
    let code =
        if status == StatusCode::SERVICE_UNAVAILABLE { jsonrpc::INTERNAL_ERROR } else { jsonrpc::INVALID_PARAMS };
    Answer::new(status, code, refused.to_string())
}

impl From<DecisionRefused> for FrontError {
    fn from(refused: DecisionRefused) -> FrontError {
        FrontError::Decision(refused)
    }
}

/// What the agent is sent for one [`FrontError`].
struct Answer {
    status: StatusCode,
    id: Option<Value>,
    code: i64,
    message: String,
    header: Option<(HeaderName, HeaderValue)>,
    data: Option<Value>,
}

impl Answer {
    /// An answer with no id, extra header or `data`; the arms that have them name them.
    fn new(status: StatusCode, code: i64, message: String) -> Answer {
        Answer { status, id: None, code, message, header: None, data: None }
    }
}

impl FrontError {
    /// The error table: one arm per case, each deciding everything the agent is sent.
    fn answer(self) -> Answer {
        use FrontError as E;
        match self {
            E::Refused(Refusal::Origin(origin)) => Answer::new(
                StatusCode::FORBIDDEN,
                jsonrpc::INVALID_REQUEST,
                format!("Origin `{origin}` is not allowed"),
            ),
            E::Refused(Refusal::Host(host)) => {
                Answer::new(StatusCode::FORBIDDEN, jsonrpc::INVALID_REQUEST, format!("Host `{host}` is not allowed"))
            }
            E::Refused(Refusal::RepeatedHost) => Answer::new(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                "the request carries more than one Host header (RFC 9112 §3.2)".into(),
            ),
            E::Refused(Refusal::MisdirectedTarget(target)) => Answer::new(
                StatusCode::MISDIRECTED_REQUEST,
                jsonrpc::INVALID_REQUEST,
                format!("the request target `{target}` names another host than the Host header"),
            ),
            E::Refused(Refusal::ProtocolVersion(version)) => Answer::new(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                format!("unsupported MCP-Protocol-Version `{version}`"),
            ),
            E::Unauthenticated { error, challenge } => Answer {
                header: Some((header::WWW_AUTHENTICATE, challenge_value(&challenge))),
                ..Answer::new(
                    StatusCode::from_u16(error.status()).unwrap_or(StatusCode::UNAUTHORIZED),
                    jsonrpc::INVALID_REQUEST,
                    error.to_string(),
                )
            },
            E::NoSuchBackend => Answer::new(StatusCode::NOT_FOUND, jsonrpc::INVALID_REQUEST, "no such backend".into()),
            E::NoSession => Answer::new(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                "missing MCP-Session-Id header: send `initialize` first".into(),
            ),
            E::UnusableSession(why) => {
                Answer::new(StatusCode::NOT_FOUND, jsonrpc::INVALID_REQUEST, format!("session {why}"))
            }
            E::NoSuchStream => {
                Answer::new(StatusCode::NOT_FOUND, jsonrpc::INVALID_REQUEST, "no such stream to resume".into())
            }
            E::BodyNotJson => Answer::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                jsonrpc::INVALID_REQUEST,
                "the body must be one JSON-RPC message sent with `Content-Type: application/json`".into(),
            ),
            E::BodyTooLarge { max_body } => Answer {
                header: Some(close_connection()),
                ..Answer::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    jsonrpc::INVALID_REQUEST,
                    format!("the body is larger than this gateway accepts (max_body = {max_body} bytes)"),
                )
            },
            E::BodyIncomplete { body_timeout } => Answer {
                header: Some(close_connection()),
                ..Answer::new(
                    StatusCode::REQUEST_TIMEOUT,
                    jsonrpc::INVALID_REQUEST,
                    format!("the body did not arrive within body_timeout ({} ms)", body_timeout.as_millis()),
                )
            },
            E::BodyUnreadable(error) => Answer::new(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                format!("the body could not be read: {error}"),
            ),
            E::NotJson(error) => Answer::new(
                StatusCode::BAD_REQUEST,
                jsonrpc::PARSE_ERROR,
                format!("the body is not valid JSON: {error}"),
            ),
            E::Batch => Answer::new(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                "JSON-RPC batches are not supported (removed in MCP 2025-06-18); send one message per POST".into(),
            ),
            E::NotJsonRpc { id } => Answer {
                id,
                ..Answer::new(
                    StatusCode::BAD_REQUEST,
                    jsonrpc::INVALID_REQUEST,
                    "not a JSON-RPC 2.0 message: it must carry \"jsonrpc\": \"2.0\"".into(),
                )
            },
            E::NotAMessage => Answer::new(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                "not a JSON-RPC 2.0 request, notification or response".into(),
            ),
            E::BadIdempotencyKey { id, refusal } => Answer {
                id: Some(id),
                ..Answer::new(StatusCode::BAD_REQUEST, jsonrpc::INVALID_PARAMS, refusal.to_string())
            },
            E::NotDeleted(cause) => Answer {
                header: retry_after(&cause),
                ..Answer::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    jsonrpc::INTERNAL_ERROR,
                    format!("the session was not deleted: {cause}"),
                )
            },
            E::LedgerNotOpen { store, retry_after } => Answer {
                header: Some((header::RETRY_AFTER, HeaderValue::from(retry_after))),
                ..Answer::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    jsonrpc::INTERNAL_ERROR,
                    format!(
                        "the gateway is starting and cannot reach its call ledger ({store}) yet, so it runs nothing; \
                         retry in {retry_after} s"
                    ),
                )
            },
            E::NoRoomForSession { id, cause } => Answer {
                id: Some(id),
                header: retry_after(&cause),
                ..Answer::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    jsonrpc::INTERNAL_ERROR,
                    format!("cannot start a session: {cause}"),
                )
            },
            E::NoRandom { id } => Answer {
                id: Some(id),
                ..Answer::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    jsonrpc::INTERNAL_ERROR,
                    "the system's random source failed; no session could be created".into(),
                )
            },
            E::NotSealed { id, cause } => Answer {
                id: Some(id),
                ..Answer::new(
                    StatusCode::BAD_REQUEST,
                    jsonrpc::INVALID_PARAMS,
                    format!("cannot start a session: {cause}"),
                )
            },
            E::TooManyRequests { max } => Answer::new(
                StatusCode::TOO_MANY_REQUESTS,
                jsonrpc::INVALID_REQUEST,
                format!(
                    "this principal already has {max} requests or streams open at this gateway \
                     (max_connections_per_principal = {max}); close one, or wait for one to finish"
                ),
            ),
            E::Limited { id, refusal } => Answer {
                id: Some(id),
                header: Some((header::RETRY_AFTER, HeaderValue::from(refusal.retry_after))),
                ..Answer::new(StatusCode::TOO_MANY_REQUESTS, jsonrpc::INVALID_REQUEST, refusal.to_string())
            },
            E::TooManyStreams { max } => Answer::new(
                StatusCode::TOO_MANY_REQUESTS,
                jsonrpc::INVALID_REQUEST,
                format!(
                    "this session already holds {max} standalone GET streams (max_streams_per_session = {max}); \
                     close one first"
                ),
            ),
            E::NotAdmin => Answer::new(
                StatusCode::FORBIDDEN,
                jsonrpc::INVALID_REQUEST,
                "the operator's console is only for administrators (`[auth] admin_principals`, or the group \
                 `admin`)"
                    .into(),
            ),
            E::NotApprover => Answer::new(
                StatusCode::FORBIDDEN,
                jsonrpc::INVALID_REQUEST,
                "the approvals page is for approvers (`[approvals] approvers`) and administrators, and only \
                 approvers decide"
                    .into(),
            ),
            E::NoFormToken => Answer::new(
                StatusCode::FORBIDDEN,
                jsonrpc::INVALID_REQUEST,
                "the decision lacks a valid form token (header `x-csrf-token`, given with the list of approvals to \
                 its reader, for 12 hours); read the list again and resend"
                    .into(),
            ),
            E::BadDecision(why) => Answer::new(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_PARAMS,
                format!("a decision is {{\"key\": KEY, \"decision\": \"approve\" | \"deny\", \"note\": TEXT}}: {why}"),
            ),
            E::Decision(refused) => decision_refused(refused),
            E::BadLinkTicket => Answer::new(
                StatusCode::NOT_FOUND,
                jsonrpc::INVALID_PARAMS,
                "this approval link is not valid here, or its request is gone".into(),
            ),
            E::LinkUsed { state, by } => Answer::new(
                StatusCode::GONE,
                jsonrpc::INVALID_REQUEST,
                match by {
                    Some(by) => format!("this approval link was used: the call was {state} by `{by}`"),
                    None => format!("this approval link no longer serves: the request is {state}"),
                },
            ),
            E::BadAdminQuery { parameter, expected } => Answer::new(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_PARAMS,
                format!("query parameter `{parameter}`: expected {expected}"),
            ),
            E::NoSuchAdminResource => Answer::new(
                StatusCode::NOT_FOUND,
                jsonrpc::INVALID_REQUEST,
                "no such console resource; there are /admin/api/backends, /admin/api/catalog, /admin/api/calls, \
                 /admin/api/calls/unknown, /admin/api/approvals, /admin/api/limits and /admin/api/pins"
                    .into(),
            ),
            E::Inspect(InspectError::UnknownOutcome(outcome)) => Answer::new(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_PARAMS,
                format!("query parameter `outcome`: expected in_flight, completed or unknown, not `{outcome}`"),
            ),
            E::Inspect(error @ InspectError::Ledger(_)) => {
                Answer::new(StatusCode::SERVICE_UNAVAILABLE, jsonrpc::INTERNAL_ERROR, error.to_string())
            }
            E::NoStreamsWithoutSessions => Answer {
                header: Some((header::ALLOW, HeaderValue::from_static("POST"))),
                ..Answer::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    jsonrpc::INVALID_REQUEST,
                    "MCP 2026-07-28 has no GET stream and no session to DELETE: POST subscriptions/listen for \
                 notifications"
                        .into(),
                )
            },
            E::HeaderMismatch { id, why } => {
                Answer { id: Some(id), ..Answer::new(StatusCode::BAD_REQUEST, jsonrpc::HEADER_MISMATCH, why) }
            }
            E::BadParams { id, why } => {
                Answer { id: Some(id), ..Answer::new(StatusCode::BAD_REQUEST, jsonrpc::INVALID_PARAMS, why) }
            }
            E::UnsupportedVersion { id, requested } => Answer {
                id: Some(id),
                data: Some(json!({"supported": MODERN_PROTOCOL_VERSIONS, "requested": requested})),
                ..Answer::new(
                    StatusCode::BAD_REQUEST,
                    jsonrpc::UNSUPPORTED_PROTOCOL_VERSION,
                    format!(
                        "protocol version `{requested}` is not served; use one of {} (or `initialize` for 2025-11-25)",
                        MODERN_PROTOCOL_VERSIONS.join(", ")
                    ),
                )
            },
            E::NoSuchMethod { id, method } => Answer {
                id,
                ..Answer::new(
                    StatusCode::NOT_FOUND,
                    jsonrpc::METHOD_NOT_FOUND,
                    format!("method not found: {method} (not part of MCP 2026-07-28)"),
                )
            },
            E::UnaskedResponse { id } => Answer {
                id: Some(id),
                ..Answer::new(
                    StatusCode::BAD_REQUEST,
                    jsonrpc::INVALID_REQUEST,
                    "MCP 2026-07-28 servers send no requests, so there is nothing to respond to".into(),
                )
            },
        }
    }
}

/// The HTTP status of a JSON-RPC error a 2026-07-28 request is answered with (its transport's status table: the
/// era's own protocol errors are 400, an unknown method 404; anything else is a normal JSON-RPC answer).
pub(super) fn modern_error_status(code: i64) -> StatusCode {
    match code {
        jsonrpc::HEADER_MISMATCH
        | jsonrpc::MISSING_REQUIRED_CLIENT_CAPABILITY
        | jsonrpc::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        jsonrpc::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// A challenge is built from ASCII messages; should one ever not be a valid header value, the bare scheme
/// still tells the agent how to authenticate.
fn challenge_value(challenge: &str) -> HeaderValue {
    HeaderValue::from_str(challenge).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

/// The rest of a body that was not read could not be told from a next request on the same connection.
fn close_connection() -> (HeaderName, HeaderValue) {
    (header::CONNECTION, HeaderValue::from_static("close"))
}

/// A full revocation list, or a full share of it, says when it will have room again.
fn retry_after(cause: &RevokeError) -> Option<(HeaderName, HeaderValue)> {
    cause.retry_after().map(|seconds| (header::RETRY_AFTER, HeaderValue::from(seconds)))
}

impl From<Refusal> for FrontError {
    fn from(refusal: Refusal) -> Self {
        FrontError::Refused(refusal)
    }
}

impl IntoResponse for FrontError {
    fn into_response(self) -> Response {
        let Answer { status, id, code, message, header, data } = self.answer();
        let mut body = jsonrpc::error(id.as_ref(), code, &message);
        if let Some(data) = data {
            body["error"]["data"] = data;
        }
        let mut response = http::json(status, &body);
        if let Some((name, value)) = header {
            response.headers_mut().insert(name, value);
        }
        response.extensions_mut().insert(RefusedWith(code));
        response
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
