//! Sending one message to a legacy SSE backend: a `POST` of the JSON-RPC message to the endpoint its stream named
//! (2024-11-05 transports §"HTTP with SSE"); the answer to a request arrives on the stream, not in the `POST`'s
//! response, which is only an acknowledgement (202, or any 2xx).
//!
//! What the status proves is decided as for Streamable HTTP backends: a failed connect, or a status the refusal
//! table classifies ([`Refusal`]), is `NotDelivered`; a deadline passing after the request left is
//! `AfterDelivery`; any other error status is `HttpStatus` (the backend may have processed the message first).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Uri};
use serde_json::Value;
use tokio::time::{Instant, timeout_at};

use crate::backend::duplex::{MessageSink, Sending};
use crate::backend::http_client::{self, HttpClient};
use crate::backend::mcp_client::{AfterDeliveryCause, Fault, NotDeliveredCause};
use crate::backend::mcp_client::{McpError, Refusal, classify_send_error};

/// How much of an error body is kept for the error message.
const ERROR_BODY_EXCERPT: usize = 512;
/// Messages nobody waits for (notifications, answers to the backend's requests) get this long to be sent.
const NOTICE_TIMEOUT: Duration = Duration::from_secs(10);

/// POSTs messages to one session's endpoint.
#[derive(Clone)]
pub(super) struct PostSink {
    pub(super) http: HttpClient,
    pub(super) endpoint: Uri,
    /// The credential, the configured extra headers and `Content-Type`: what every `POST` carries.
    pub(super) headers: HeaderMap,
}

impl MessageSink for PostSink {
    fn send<'a>(&'a self, message: &'a Value, deadline: Instant) -> Sending<'a> {
        Box::pin(self.post(message, deadline))
    }

    fn notify(&self, message: Value) {
        // Each POST is its own HTTP request: messages nobody waits for may overtake each other, as over any
        // HTTP transport.
        let sink = self.clone();
        tokio::spawn(async move {
            if let Err(error) = sink.post(&message, Instant::now() + NOTICE_TIMEOUT).await {
                tracing::debug!(%error, "could not send a message to a legacy SSE backend");
            }
        });
    }
}

impl PostSink {
    async fn post(&self, message: &Value, deadline: Instant) -> Result<(), McpError> {
        let body = serde_json::to_vec(message).map_err(|error| McpError::NotDelivered {
            cause: NotDeliveredCause::Encode,
            reason: format!("cannot encode the message: {error}").into(),
        })?;
        let request = http_client::request(Method::POST, &self.endpoint, self.headers.clone(), Bytes::from(body));
        let mut response = match timeout_at(deadline, self.http.send(request)).await {
            Err(_) => {
                let reason = "the deadline passed while posting the message to the backend".into();
                return Err(McpError::AfterDelivery { cause: AfterDeliveryCause::Deadline, reason });
            }
            Ok(Err(error)) => return Err(classify_send_error(&error)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let mut excerpt = Vec::new();
        while excerpt.len() < ERROR_BODY_EXCERPT {
            match timeout_at(deadline, http_client::next_chunk(response.body_mut())).await {
                Ok(Ok(Some(chunk))) => excerpt.extend_from_slice(&chunk),
                _ => break,
            }
        }
        excerpt.truncate(ERROR_BODY_EXCERPT);
        let body = String::from_utf8_lossy(&excerpt).into_owned();
        Err(match Refusal::of(status.as_u16()) {
            Some(refusal) => McpError::NotDelivered {
                cause: NotDeliveredCause::Refused,
                reason: Fault::status(refusal.status(), &body),
            },
            None => McpError::HttpStatus { status: status.as_u16(), body },
        })
    }
}
