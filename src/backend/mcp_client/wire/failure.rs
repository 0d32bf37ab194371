//! Why an exchange failed, before a caller decides what it means: the exchange's own cases ([`ExchangeError`]), a
//! modern backend's JSON-RPC error with an HTTP status ([`Rejection`]), and how a failed send or an error status
//! becomes an [`McpError`] of the right class.
//!
//! Rules: a status proves a refusal only as [`Refusal`] says; a `POST` that may have left is never
//! `NotDelivered`; a modern backend's JSON-RPC error body is its own answer, and only a header mismatch or an
//! unserved version in a 4xx says the request was refused unprocessed.

use serde_json::Value;

use super::refusal::Refusal;
use crate::backend::http_client::SendError;
use crate::backend::mcp_client::error::{AfterDeliveryCause, McpError, NotDeliveredCause};
use crate::backend::mcp_client::fault::Fault;
use crate::mcp::jsonrpc;

/// How much of an HTTP error body is kept for the error message.
const ERROR_BODY_EXCERPT: usize = 512;

/// Why an exchange failed, before the caller decides what it means.
#[derive(Debug)]
pub(crate) enum ExchangeError {
    /// `404` on a request that carried a session id: the backend ended the session and did not process the
    /// request (transports §"Session Management" 3–4).
    SessionGone,
    /// Modern wire: an HTTP error status whose body is a JSON-RPC error (the backend's own answer).
    Rejected(Rejection),
    /// Modern wire: `400`, `404` or `405` without a JSON-RPC error body, as a 2025-era server answers a request
    /// without a session: the backend refused the request unprocessed and may no longer be modern.
    NotModern(McpError),
    Failed(McpError),
}

impl ExchangeError {
    /// The error for a caller that does not branch on the exchange's own cases.
    pub(crate) fn into_error(self) -> McpError {
        match self {
            ExchangeError::SessionGone => McpError::NotDelivered {
                cause: NotDeliveredCause::SessionEnded,
                reason: "the backend ended the session (404)".into(),
            },
            ExchangeError::Rejected(rejection) => rejection.into_error(),
            ExchangeError::NotModern(error) | ExchangeError::Failed(error) => error,
        }
    }
}

impl std::fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExchangeError::SessionGone => f.write_str("the backend ended the session (HTTP 404)"),
            ExchangeError::Rejected(Rejection { status, code, message, .. }) => {
                write!(f, "HTTP {status} with error {code}: {message}")
            }
            ExchangeError::NotModern(error) | ExchangeError::Failed(error) => error.fmt(f),
        }
    }
}

impl From<McpError> for ExchangeError {
    fn from(error: McpError) -> Self {
        ExchangeError::Failed(error)
    }
}

/// A JSON-RPC error a modern backend answered with an HTTP error status.
#[derive(Debug)]
pub(crate) struct Rejection {
    pub(crate) status: u16,
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl Rejection {
    /// The backend's JSON-RPC error as the caller sees it, except a header mismatch or an unserved version: those
    /// say the gateway's request was refused unprocessed.
    pub(crate) fn into_error(self) -> McpError {
        let Rejection { status, code, message, data } = self;
        match code {
            jsonrpc::HEADER_MISMATCH | jsonrpc::UNSUPPORTED_PROTOCOL_VERSION if (400..500).contains(&status) => {
                McpError::NotDelivered {
                    cause: NotDeliveredCause::Refused,
                    reason: format!("the backend refused it unprocessed with HTTP {status}, error {code}: {message}")
                        .into(),
                }
            }
            _ => McpError::Rpc { code, message, data },
        }
    }
}

/// What an HTTP error status means on the modern wire: the backend's own JSON-RPC error when the body holds one;
/// without one, the refusal table decides, and a 400 or 405 is also what a 2025-era server answers a request
/// without a session.
pub(crate) fn modern_refusal(status: u16, body: &[u8]) -> ExchangeError {
    let error =
        serde_json::from_slice::<Value>(body).ok().and_then(|mut message| message.get_mut("error").map(Value::take));
    if let Some(code) = error.as_ref().and_then(|error| error.get("code")).and_then(Value::as_i64) {
        let field = |name: &str| error.as_ref().and_then(|error| error.get(name));
        let message = field("message").and_then(Value::as_str).unwrap_or_default().to_owned();
        return ExchangeError::Rejected(Rejection { status, code, message, data: field("data").cloned() });
    }
    let body = excerpt(body);
    let error = match Refusal::of(status) {
        Some(refusal) => {
            McpError::NotDelivered { cause: NotDeliveredCause::Refused, reason: Fault::status(refusal.status(), &body) }
        }
        None => McpError::HttpStatus { status, body },
    };
    if matches!(status, 400 | 405) { ExchangeError::NotModern(error) } else { ExchangeError::Failed(error) }
}

pub(super) fn after_delivery(cause: AfterDeliveryCause, reason: impl Into<Fault>) -> McpError {
    McpError::AfterDelivery { cause, reason: reason.into() }
}

/// The start of an error body, for messages.
pub(crate) fn excerpt(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_EXCERPT)]).into_owned()
}

pub(crate) fn classify_send_error(error: &SendError) -> McpError {
    if error.never_sent() {
        McpError::NotDelivered { cause: NotDeliveredCause::Connect, reason: connect_fault(error) }
    } else {
        after_delivery(
            AfterDeliveryCause::Ended,
            format!("the connection failed after the request was sent: {}", error_chain(error)),
        )
    }
}

/// Why a request never left: a refused connection names its address; any other failure to connect, the HTTP
/// stack's words.
pub(crate) fn connect_fault(error: &SendError) -> Fault {
    match error {
        SendError::Connect { address, source } if is_refused(source.as_ref()) => {
            Fault::ConnectionRefused { address: address.clone() }
        }
        SendError::Connect { address, source } => {
            Fault::Unreachable { address: address.clone(), detail: error_chain(source.as_ref()) }
        }
        other => Fault::Other(error_chain(other)),
    }
}

/// Whether an I/O error in the chain is a refused connection.
fn is_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
            return true;
        }
        next = error.source();
    }
    false
}

/// A client error's top-level message hides the cause ("client error (Connect)"); the chain names it.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
