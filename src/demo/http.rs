//! The demo server's Streamable HTTP transport (MCP 2025-11-25 `basic/transports.mdx`, reference §A1): one
//! endpoint, `POST` for messages, `DELETE` to end a session, `GET` refused with 405 (§A1.3: the demo never sends
//! server-initiated messages, so it offers no SSE stream).
//!
//! Rules, in the order a `POST` is checked:
//! 1. `Origin`, when present, must be a loopback origin, else 403 (§A1.1: DNS-rebinding defence; browsers always
//!    send `Origin` on a `POST`, and non-browser clients, which send none, are not covered by the rule).
//! 2. `Accept` must cover both `application/json` and `text/event-stream` (§A1.2), else 406. Media ranges (`*/*`,
//!    `application/*`, `text/*`) count, as in HTTP content negotiation.
//! 3. `Content-Type` must be `application/json`, else 415.
//! 4. `MCP-Protocol-Version`, when present, must be a supported version — any of them, not only the negotiated
//!    one (§A1.7) — else 400. Absent, the client is taken to be a 2025-03-26 one, which never sends it.
//! 5. The body must be one JSON-RPC message (§A1.2): invalid JSON is 400 with `-32700`; an array (a 2025-03-26
//!    batch) is refused cleanly with 400 and `-32600`, as §A1.2 allows.
//! 6. Except for `initialize`, which starts a session and returns its id in `Mcp-Session-Id`, every message needs
//!    a live session: no header is 400, an unknown or ended one 404 (§A1.6).
//! 7. Notifications and responses get 202 with no body; requests get one `application/json` answer.
//!
//! Every refusal carries a JSON-RPC error body without an id (or with the request's id when it could be read), so
//! a client can show why.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::header::{ACCEPT, ALLOW, CONTENT_TYPE, ORIGIN};
use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::Value;

use super::methods;
use super::sessions::{SessionId, Sessions};
use super::tools::Caller;
use super::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER, SUPPORTED_PROTOCOL_VERSIONS};
use crate::mcp::jsonrpc::{self, Kind};
use crate::mcp::method;

/// The code SDKs use for "Session not found" (implementation-specific range, §A2.1).
const SESSION_NOT_FOUND: i64 = -32001;

/// Why a request was refused at the HTTP level.
#[derive(Debug, thiserror::Error)]
pub enum Reject {
    #[error("Forbidden: Origin {0:?} is not allowed; this server accepts only loopback origins")]
    ForbiddenOrigin(String),
    #[error("Not Acceptable: Accept must list both application/json and text/event-stream")]
    NotAcceptable,
    #[error("Unsupported Media Type: Content-Type must be application/json")]
    UnsupportedMediaType,
    #[error("Bad Request: unsupported MCP-Protocol-Version {0:?}; supported: 2025-11-25, 2025-06-18, 2025-03-26")]
    UnsupportedVersion(String),
    #[error("Bad Request: the Mcp-Session-Id header is required; send initialize first")]
    MissingSession,
    #[error("Session not found: it ended or never existed; send initialize to start a new one")]
    UnknownSession,
    #[error("Parse error: {0}")]
    Parse(#[from] serde_json::Error),
    #[error("Invalid Request: JSON-RPC batches are not supported; send one message per POST")]
    Batch,
    #[error("Invalid Request: the body is not a JSON-RPC request, notification or response")]
    Invalid { id: Option<Value> },
}

impl Reject {
    fn status(&self) -> StatusCode {
        match self {
            Reject::ForbiddenOrigin(_) => StatusCode::FORBIDDEN,
            Reject::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            Reject::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Reject::UnknownSession => StatusCode::NOT_FOUND,
            Reject::UnsupportedVersion(_)
            | Reject::MissingSession
            | Reject::Parse(_)
            | Reject::Batch
            | Reject::Invalid { .. } => StatusCode::BAD_REQUEST,
        }
    }

    fn code(&self) -> i64 {
        match self {
            Reject::Parse(_) => jsonrpc::PARSE_ERROR,
            Reject::UnknownSession => SESSION_NOT_FOUND,
            _ => jsonrpc::INVALID_REQUEST,
        }
    }
}

impl IntoResponse for Reject {
    fn into_response(self) -> Response {
        let id = match &self {
            Reject::Invalid { id } => id.as_ref(),
            _ => None,
        };
        let body = jsonrpc::error(id, self.code(), &self.to_string());
        (self.status(), Json(body)).into_response()
    }
}

/// `POST /mcp`: one JSON-RPC message.
pub async fn post(State(sessions): State<Arc<Sessions>>, headers: HeaderMap, body: Bytes) -> Result<Response, Reject> {
    check_origin(&headers)?;
    check_accept(&headers)?;
    check_content_type(&headers)?;
    check_protocol_version(&headers)?;
    let message: Value = serde_json::from_slice(&body)?;
    if message.is_array() {
        return Err(Reject::Batch);
    }
    let params = message.get("params");
    match jsonrpc::kind(&message) {
        Kind::Request { id, method: method::INITIALIZE } => Ok(initialize(&sessions, id, params)),
        Kind::Request { id, method } => {
            let caller = Caller { sessions: &sessions, session: live_session(&headers, &sessions)? };
            let answer = match methods::handle(method, params, caller).await {
                Ok(result) => jsonrpc::result(id, result),
                Err(error) => jsonrpc::error(Some(id), error.code(), &error.to_string()),
            };
            Ok(Json(answer).into_response())
        }
        Kind::Notification { .. } | Kind::Response { .. } => {
            live_session(&headers, &sessions)?;
            Ok(StatusCode::ACCEPTED.into_response())
        }
        Kind::Invalid => Err(Reject::Invalid { id: message.get("id").filter(|id| jsonrpc::is_valid_id(id)).cloned() }),
    }
}

/// `DELETE /mcp`: ends the session (§A1.6 item 5); later requests with its id get 404.
pub async fn delete(State(sessions): State<Arc<Sessions>>, headers: HeaderMap) -> Result<StatusCode, Reject> {
    check_origin(&headers)?;
    check_protocol_version(&headers)?;
    let session = live_session(&headers, &sessions)?;
    // A concurrent DELETE may have won the race; either way the session is gone, as the client asked.
    sessions.end(session);
    Ok(StatusCode::OK)
}

/// `GET /mcp`: no server-to-client stream is offered (§A1.3 allows 405).
pub async fn get() -> Response {
    let allow = [(ALLOW, HeaderValue::from_static("POST, DELETE"))];
    (StatusCode::METHOD_NOT_ALLOWED, allow, Json(jsonrpc::error(None, jsonrpc::INVALID_REQUEST, GET_REFUSED)))
        .into_response()
}

const GET_REFUSED: &str = "Method Not Allowed: this server sends no server-initiated messages, so it offers no SSE \
                           stream; POST messages instead";

/// Answers `initialize`, starting a session only when the handshake succeeds.
fn initialize(sessions: &Sessions, id: &Value, params: Option<&Value>) -> Response {
    match methods::initialize(params) {
        Ok(result) => {
            let session = sessions.create();
            tracing::debug!(%session, "demo session started");
            // A session id is hex digits, always a valid header value (axum would answer 500 otherwise).
            ([(SESSION_ID_HEADER, session.to_string())], Json(jsonrpc::result(id, result))).into_response()
        }
        Err(error) => Json(jsonrpc::error(Some(id), error.code(), &error.to_string())).into_response(),
    }
}

/// The live session a request names.
fn live_session(headers: &HeaderMap, sessions: &Sessions) -> Result<SessionId, Reject> {
    let header = headers.get(SESSION_ID_HEADER).ok_or(Reject::MissingSession)?;
    let session = header.to_str().ok().and_then(SessionId::parse).ok_or(Reject::UnknownSession)?;
    if sessions.contains(session) { Ok(session) } else { Err(Reject::UnknownSession) }
}

fn check_origin(headers: &HeaderMap) -> Result<(), Reject> {
    match headers.get(ORIGIN) {
        None => Ok(()),
        Some(origin) if origin.to_str().is_ok_and(is_loopback_origin) => Ok(()),
        Some(origin) => Err(Reject::ForbiddenOrigin(String::from_utf8_lossy(origin.as_bytes()).into_owned())),
    }
}

/// `http(s)://` followed by `localhost`, a loopback IPv4 address or `[::1]`, with an optional port.
fn is_loopback_origin(origin: &str) -> bool {
    let Some(authority) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']').map_or("", |(host, _)| host),
        None => authority.split(':').next().unwrap_or(""),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn check_accept(headers: &HeaderMap) -> Result<(), Reject> {
    let (mut json, mut sse) = (false, false);
    let ranges = headers.get_all(ACCEPT).iter().filter_map(|value| value.to_str().ok()).flat_map(|v| v.split(','));
    for range in ranges.map(media_type) {
        let any = range == "*/*";
        json |= any || range.eq_ignore_ascii_case("application/json") || range.eq_ignore_ascii_case("application/*");
        sse |= any || range.eq_ignore_ascii_case("text/event-stream") || range.eq_ignore_ascii_case("text/*");
    }
    if json && sse { Ok(()) } else { Err(Reject::NotAcceptable) }
}

fn check_content_type(headers: &HeaderMap) -> Result<(), Reject> {
    let content_type = headers.get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).map(media_type);
    match content_type {
        Some(media) if media.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(Reject::UnsupportedMediaType),
    }
}

/// The media type of a header element, without parameters (`application/json; charset=utf-8`).
fn media_type(element: &str) -> &str {
    element.split(';').next().unwrap_or("").trim()
}

fn check_protocol_version(headers: &HeaderMap) -> Result<(), Reject> {
    let Some(value) = headers.get(PROTOCOL_VERSION_HEADER) else { return Ok(()) };
    match value.to_str() {
        Ok(version) if SUPPORTED_PROTOCOL_VERSIONS.contains(&version) => Ok(()),
        _ => Err(Reject::UnsupportedVersion(String::from_utf8_lossy(value.as_bytes()).into_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| (http::HeaderName::from_static(name), HeaderValue::from_static(value)))
            .collect()
    }

    #[test]
    fn loopback_origins_pass_and_others_do_not() {
        for origin in ["http://localhost:3000", "https://127.0.0.1", "http://[::1]:8080", "http://LOCALHOST"] {
            assert!(is_loopback_origin(origin), "{origin}");
        }
        for origin in
            ["http://evil.example", "null", "http://localhost.evil.example", "file://localhost", "http://[::2]"]
        {
            assert!(!is_loopback_origin(origin), "{origin}");
        }
    }

    #[test]
    fn accept_needs_both_types_or_covering_ranges() {
        assert!(check_accept(&headers(&[("accept", "application/json, text/event-stream")])).is_ok());
        assert!(check_accept(&headers(&[("accept", "text/event-stream;q=0.9,application/json")])).is_ok());
        assert!(check_accept(&headers(&[("accept", "*/*")])).is_ok());
        assert!(check_accept(&headers(&[("accept", "application/json")])).is_err());
        assert!(check_accept(&headers(&[])).is_err());
    }

    #[test]
    fn content_type_may_carry_parameters() {
        assert!(check_content_type(&headers(&[("content-type", "application/json; charset=utf-8")])).is_ok());
        assert!(check_content_type(&headers(&[("content-type", "text/plain")])).is_err());
    }
}
