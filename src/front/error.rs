//! The front's error table: every way the agent-facing endpoint refuses a request, and the HTTP answer each one
//! gets (MCP transports §"Sending Messages to the Server": a refused message's body MAY be a JSON-RPC error with
//! no id; design §3).
//!
//! Owns: [`FrontError`] and its one `match` deciding, per case, the HTTP status, the JSON-RPC code, the id, the
//! message the agent reads and any extra header (`Connection: close` after an unread body, `Retry-After` when the
//! revocation list is full, `WWW-Authenticate` when credentials are refused — with `auth::AuthError`'s status:
//! 401, 403 `insufficient_scope`, 400 `invalid_request`). Handlers and extractors return a `FrontError`; none builds an error answer itself.
//! The operator's console API (`/admin/api/…`) answers its refusals from the same table, in the same shape.
//!
//! Rules: the messages are sentences an agent (or an LLM) can act on; a session that cannot be used is 404 for
//! every reason (malformed, forged, expired, foreign, revoked — MCP 2025-11-25 §A1.6) and only the text tells
//! them apart; the id is the request's when it is known and valid, else none.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::access::RefusedWith;
use super::guard::Refusal;
use super::http;
use super::revocations::RevokeError;
use super::session::SealError;
use crate::auth::AuthError;
use crate::mcp::jsonrpc;
use crate::router::idempotency::KeyRefusal;
use crate::router::inspect::InspectError;

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
    /// The operator's console was asked by an authenticated caller that is not an administrator.
    NotAdmin,
    /// A query parameter of the console API is unknown, repeated or out of range.
    BadAdminQuery { parameter: String, expected: String },
    /// The console API has no such resource.
    NoSuchAdminResource,
    /// The console's question could not be answered (a bad outcome filter, or the ledger cannot be read).
    Inspect(InspectError),
}

/// What the agent is sent for one [`FrontError`].
struct Answer {
    status: StatusCode,
    id: Option<Value>,
    code: i64,
    message: String,
    header: Option<(HeaderName, HeaderValue)>,
}

impl FrontError {
    /// The error table: one arm per case, each deciding everything the agent is sent.
    fn answer(self) -> Answer {
        use FrontError as E;
        let (status, id, code, message, header) = match self {
            E::Refused(Refusal::Origin(origin)) => (
                StatusCode::FORBIDDEN,
                None,
                jsonrpc::INVALID_REQUEST,
                format!("Origin `{origin}` is not allowed"),
                None,
            ),
            E::Refused(Refusal::Host(host)) => {
                (StatusCode::FORBIDDEN, None, jsonrpc::INVALID_REQUEST, format!("Host `{host}` is not allowed"), None)
            }
            E::Refused(Refusal::ProtocolVersion(version)) => (
                StatusCode::BAD_REQUEST,
                None,
                jsonrpc::INVALID_REQUEST,
                format!("unsupported MCP-Protocol-Version `{version}`"),
                None,
            ),
            E::Unauthenticated { error, challenge } => (
                StatusCode::from_u16(error.status()).unwrap_or(StatusCode::UNAUTHORIZED),
                None,
                jsonrpc::INVALID_REQUEST,
                error.to_string(),
                Some((header::WWW_AUTHENTICATE, challenge_value(&challenge))),
            ),
            E::NoSuchBackend => (StatusCode::NOT_FOUND, None, jsonrpc::INVALID_REQUEST, "no such backend".into(), None),
            E::NoSession => (
                StatusCode::BAD_REQUEST,
                None,
                jsonrpc::INVALID_REQUEST,
                "missing MCP-Session-Id header: send `initialize` first".into(),
                None,
            ),
            E::UnusableSession(why) => {
                (StatusCode::NOT_FOUND, None, jsonrpc::INVALID_REQUEST, format!("session {why}"), None)
            }
            E::NoSuchStream => {
                (StatusCode::NOT_FOUND, None, jsonrpc::INVALID_REQUEST, "no such stream to resume".into(), None)
            }
            E::BodyNotJson => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                None,
                jsonrpc::INVALID_REQUEST,
                "the body must be one JSON-RPC message sent with `Content-Type: application/json`".into(),
                None,
            ),
            E::BodyTooLarge { max_body } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                None,
                jsonrpc::INVALID_REQUEST,
                format!("the body is larger than this gateway accepts (max_body = {max_body} bytes)"),
                Some(close_connection()),
            ),
            E::BodyIncomplete { body_timeout } => (
                StatusCode::REQUEST_TIMEOUT,
                None,
                jsonrpc::INVALID_REQUEST,
                format!("the body did not arrive within body_timeout ({} ms)", body_timeout.as_millis()),
                Some(close_connection()),
            ),
            E::BodyUnreadable(error) => (
                StatusCode::BAD_REQUEST,
                None,
                jsonrpc::INVALID_REQUEST,
                format!("the body could not be read: {error}"),
                None,
            ),
            E::NotJson(error) => (
                StatusCode::BAD_REQUEST,
                None,
                jsonrpc::PARSE_ERROR,
                format!("the body is not valid JSON: {error}"),
                None,
            ),
            E::Batch => (
                StatusCode::BAD_REQUEST,
                None,
                jsonrpc::INVALID_REQUEST,
                "JSON-RPC batches are not supported (removed in MCP 2025-06-18); send one message per POST".into(),
                None,
            ),
            E::NotJsonRpc { id } => (
                StatusCode::BAD_REQUEST,
                id,
                jsonrpc::INVALID_REQUEST,
                "not a JSON-RPC 2.0 message: it must carry \"jsonrpc\": \"2.0\"".into(),
                None,
            ),
            E::NotAMessage => (
                StatusCode::BAD_REQUEST,
                None,
                jsonrpc::INVALID_REQUEST,
                "not a JSON-RPC 2.0 request, notification or response".into(),
                None,
            ),
            E::BadIdempotencyKey { id, refusal } => {
                (StatusCode::BAD_REQUEST, Some(id), jsonrpc::INVALID_PARAMS, refusal.to_string(), None)
            }
            E::NotDeleted(cause) => (
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                jsonrpc::INTERNAL_ERROR,
                format!("the session was not deleted: {cause}"),
                retry_after(&cause),
            ),
            E::NoRoomForSession { id, cause } => (
                StatusCode::SERVICE_UNAVAILABLE,
                Some(id),
                jsonrpc::INTERNAL_ERROR,
                format!("cannot start a session: {cause}"),
                retry_after(&cause),
            ),
            E::NoRandom { id } => (
                StatusCode::INTERNAL_SERVER_ERROR,
                Some(id),
                jsonrpc::INTERNAL_ERROR,
                "the system's random source failed; no session could be created".into(),
                None,
            ),
            E::NotSealed { id, cause } => (
                StatusCode::BAD_REQUEST,
                Some(id),
                jsonrpc::INVALID_PARAMS,
                format!("cannot start a session: {cause}"),
                None,
            ),
            E::NotAdmin => (
                StatusCode::FORBIDDEN,
                None,
                jsonrpc::INVALID_REQUEST,
                "the operator's console is only for callers on the gateway's machine and administrators \
                 (`[auth] admin_principals`, or the group `admin`)"
                    .into(),
                None,
            ),
            E::BadAdminQuery { parameter, expected } => (
                StatusCode::BAD_REQUEST,
                None,
                jsonrpc::INVALID_PARAMS,
                format!("query parameter `{parameter}`: expected {expected}"),
                None,
            ),
            E::NoSuchAdminResource => (
                StatusCode::NOT_FOUND,
                None,
                jsonrpc::INVALID_REQUEST,
                "no such console resource; there are /admin/api/backends, /admin/api/catalog, /admin/api/calls and \
                 /admin/api/calls/unknown"
                    .into(),
                None,
            ),
            E::Inspect(InspectError::UnknownOutcome(outcome)) => (
                StatusCode::BAD_REQUEST,
                None,
                jsonrpc::INVALID_PARAMS,
                format!("query parameter `outcome`: expected in_flight, completed or unknown, not `{outcome}`"),
                None,
            ),
            E::Inspect(error @ InspectError::Ledger(_)) => {
                (StatusCode::SERVICE_UNAVAILABLE, None, jsonrpc::INTERNAL_ERROR, error.to_string(), None)
            }
        };
        Answer { status, id, code, message, header }
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

/// A full revocation list says when it will have room again.
fn retry_after(cause: &RevokeError) -> Option<(HeaderName, HeaderValue)> {
    match cause {
        RevokeError::Full { retry_after, .. } => Some((header::RETRY_AFTER, HeaderValue::from(*retry_after))),
        RevokeError::Log(_) => None,
    }
}

impl From<Refusal> for FrontError {
    fn from(refusal: Refusal) -> Self {
        FrontError::Refused(refusal)
    }
}

impl IntoResponse for FrontError {
    fn into_response(self) -> Response {
        let Answer { status, id, code, message, header } = self.answer();
        let mut response = http::json(status, &jsonrpc::error(id.as_ref(), code, &message));
        if let Some((name, value)) = header {
            response.headers_mut().insert(name, value);
        }
        response.extensions_mut().insert(RefusedWith(code));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn an_answer_carries_status_code_id_message_and_header() {
        let full = RevokeError::Full { capacity: 2, retry_after: 7 };
        let response = FrontError::NoRoomForSession { id: Value::from(3), cause: full }.into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "7");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let body = body_of(response).await;
        assert_eq!(body["id"], 3);
        assert_eq!(body["error"]["code"], jsonrpc::INTERNAL_ERROR);
        assert!(body["error"]["message"].as_str().unwrap().starts_with("cannot start a session: "), "{body}");
    }

    #[tokio::test]
    async fn refused_credentials_carry_their_status_and_challenge() {
        let challenge = "Bearer error=\"insufficient_scope\"".to_owned();
        let error = AuthError::InsufficientScope(vec!["mcp:tools".into()]);
        let response = FrontError::Unauthenticated { error, challenge }.into_response();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer error=\"insufficient_scope\"");
        let body = body_of(response).await;
        assert!(body["error"]["message"].as_str().unwrap().contains("mcp:tools"), "{body}");
        let odd = FrontError::Unauthenticated { error: AuthError::Missing, challenge: "Bearer\n".into() };
        assert_eq!(odd.into_response().headers()[header::WWW_AUTHENTICATE], "Bearer");
    }

    #[tokio::test]
    async fn refusals_without_a_known_id_answer_with_a_null_id() {
        let response = FrontError::UnusableSession("has expired; initialize a new one").into_response();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert!(response.headers().get(header::CONNECTION).is_none());
        let body = body_of(response).await;
        assert_eq!(body["id"], Value::Null);
        assert_eq!(body["error"]["message"], "session has expired; initialize a new one");
        let log = RevokeError::Log(super::super::revocations::LogError("disk full".into()));
        let not_deleted = FrontError::NotDeleted(log).into_response();
        assert_eq!(not_deleted.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(not_deleted.headers().get(header::RETRY_AFTER).is_none(), "only a full list says when to retry");
    }
}
