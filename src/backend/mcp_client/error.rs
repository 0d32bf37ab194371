//! The client's error classes: what callers branch on to keep the at-most-once promise.
//!
//! Rule: only [`McpError::NotDelivered`] (and its OAuth form, [`McpError::AuthorizationRequired`]) proves that the backend did not process a request, whatever the
//! transport — HTTP (nothing reached the backend, or it refused with a status that proves so), stdio (no byte of
//! the request entered the process's stdin: the spawn, the handshake or the table's caps refused it) or legacy SSE
//! (the `POST` never reached the backend, or the stream or handshake before it failed).

use std::fmt;

use serde_json::Value;

use super::fault::{Audience, Fault, render_status};

use crate::telemetry::ErrorType;
use crate::telemetry::trace::CallFailure;

/// Why a request to a backend failed. Callers branch on the class; the root cause ([`Fault`]) is put into words
/// once, by [`McpError::render`].
#[derive(Debug, Clone)]
pub enum McpError {
    /// The backend did not process the request: connecting failed, the handshake before it did, the session
    /// table or a process cap had no room, or the backend refused it with a status that proves it was not
    /// processed ([`super::Refusal`]). Only this error proves that a tool did not run.
    NotDelivered { cause: NotDeliveredCause, reason: Fault },
    /// The backend received the request, or may have, but its answer is unusable. The outcome is unknown.
    AfterDelivery { cause: AfterDeliveryCause, reason: Fault },
    /// The backend answered with an HTTP error status that does not prove a refusal (see [`super::Refusal`]; nor
    /// the `404` of an ended session). The outcome is unknown.
    HttpStatus { status: u16, body: String },
    /// The agent cancelled the request after it was sent; the backend was told. It may have partly run.
    Cancelled,
    /// The request was not sent: the principal must authorize the gateway at the backend's authorization server
    /// first (`url` to open; `None` when the gateway itself asked and nobody has authorized the backend yet).
    /// Like [`McpError::NotDelivered`], it proves the backend did not process the request.
    AuthorizationRequired { backend: String, url: Option<String> },
    /// The backend answered with a JSON-RPC error.
    Rpc { code: i64, message: String, data: Option<Value> },
}

impl std::error::Error for McpError {}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.render(Audience::Operator, f)
    }
}

/// An error in the words of one audience (see [`McpError::for_audience`]).
pub struct ForAudience<'a>(&'a McpError, Audience);

impl fmt::Display for ForAudience<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.render(self.1, f)
    }
}

impl McpError {
    /// The error in words for `audience`: its root cause once, and what to do.
    pub fn render(&self, audience: Audience, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpError::NotDelivered { reason, .. } | McpError::AfterDelivery { reason, .. } => {
                reason.render(audience, f)
            }
            McpError::HttpStatus { status, body } => render_status(*status, body, audience, f),
            McpError::Cancelled => f.write_str("the request was cancelled by the agent after it was sent"),
            McpError::AuthorizationRequired { backend, url: Some(url) } => {
                write!(f, "backend `{backend}` needs authorization: open {url}")
            }
            McpError::AuthorizationRequired { backend, url: None } => {
                write!(f, "backend `{backend}` needs authorization")
            }
            McpError::Rpc { code, message, .. } => write!(f, "the backend answered with error {code}: {message}"),
        }
    }

    /// The error as `audience` reads it.
    pub fn for_audience(&self, audience: Audience) -> ForAudience<'_> {
        ForAudience(self, audience)
    }

    /// The root cause, for a caller that reports this failure under another class (a failed handshake is
    /// `NotDelivered` whatever failed in it).
    pub fn into_fault(self) -> Fault {
        match self {
            McpError::NotDelivered { reason, .. } | McpError::AfterDelivery { reason, .. } => reason,
            McpError::HttpStatus { status, body } => Fault::Status { status, body },
            other => Fault::Other(other.to_string()),
        }
    }

    /// True only when the backend provably did not process the request.
    pub fn proves_not_delivered(&self) -> bool {
        matches!(self, McpError::NotDelivered { .. } | McpError::AuthorizationRequired { .. })
    }

    /// How a failed request reads on its CLIENT span: the JSON-RPC code, the HTTP status (a span may carry it; a
    /// metric label may not), or the class [`McpError::error_type`] names.
    pub fn call_failure(&self) -> CallFailure {
        match (self, self.error_type()) {
            (McpError::Rpc { code, message, .. }, _) => CallFailure::rpc(*code, message),
            (McpError::HttpStatus { status, .. }, _) => CallFailure::new(status.to_string(), self.to_string()),
            (_, error_type) => CallFailure::new(error_type.label(), self.to_string()),
        }
    }

    /// The error's class as a metric's `error_type` says it.
    pub fn error_type(&self) -> ErrorType {
        ErrorType::Failure(match self {
            McpError::Rpc { code, .. } => return ErrorType::Rpc(*code),
            McpError::NotDelivered { .. } => "not_delivered",
            McpError::AuthorizationRequired { .. } => "authorization_required",
            McpError::AfterDelivery { cause: AfterDeliveryCause::Deadline, .. } => "timeout",
            McpError::AfterDelivery { .. } => "after_delivery",
            McpError::HttpStatus { .. } => "http_status",
            McpError::Cancelled => "cancelled",
        })
    }
}

/// What kept a request from the backend (the typed part of [`McpError::NotDelivered`]; `reason` says the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotDeliveredCause {
    /// No connection to the backend (or to its event stream) could be made.
    Connect,
    /// The request could not be encoded.
    Encode,
    /// The session's handshake failed: `initialize`, its session id or protocol version, or its deadline.
    Handshake,
    /// The backend refused the request with a status that proves it was not processed ([`super::Refusal`]).
    Refused,
    /// No room for another session or process: the session table, a per-principal or a process cap.
    NoRoom,
    /// The backend's process could not be started, or is waiting out its start-up backoff.
    ProcessStart,
    /// The session (a process, a stream, a re-initialized HTTP session) had ended before the request went out.
    SessionEnded,
    /// No OAuth token could be obtained for the backend, or it refused a fresh one too.
    Authorization,
}

/// Why an answer is unusable once the request may have reached the backend (the typed part of
/// [`McpError::AfterDelivery`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterDeliveryCause {
    /// The exchange's deadline passed.
    Deadline,
    /// The connection, the event stream or the process ended before the answer.
    Ended,
    /// The answer could not be used: not JSON, a broken event stream, over the byte limit, of a wrong type or
    /// encoding, or without the fields it must have.
    Malformed,
}

/// The backend client's HTTP stack could not be built.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot build the backend HTTP client: {0}")]
pub struct ClientBuildError(pub(crate) String);
