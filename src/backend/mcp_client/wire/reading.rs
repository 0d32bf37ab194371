//! Reading an exchange's answer (MCP 2025-11-25, transports §"Sending messages to the server", §"Resumability and
//! redelivery"): a JSON body, or an event stream read until the response with the request's id and resumed with
//! `GET` + `Last-Event-ID` when it ends early; and a session's standalone stream.
//!
//! Rules: every chunk is read under the exchange's deadline and counts against its one byte limit, resumptions
//! included; server-to-client requests met on a stream are answered so that the backend does not wait for us;
//! a failure here comes after the request may have been delivered, so it is `AfterDelivery`, and a refused
//! resumption never makes the `POST` before it undelivered ([`Exchange::resume`]).

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::time::{Instant, timeout_at};

use super::exchange::{Exchange, Wire};
use super::failure::{ExchangeError, after_delivery, error_chain};
use super::response::response_id;
use super::server_request::answer_server_request;
use crate::backend::event_stream::{SseDecoder, SseEvent};
use crate::backend::http_client::{self, Response};
use crate::backend::mcp_client::error::{AfterDeliveryCause, McpError};
use crate::mcp::jsonrpc::{self, Kind};

/// How many times one exchange may resume a stream that ended early.
const MAX_RESUMPTIONS: usize = 3;
/// The longest a backend's `retry` may make us wait before resuming.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(5);
/// The wait before resuming when the stream never sent `retry`.
const DEFAULT_RETRY_WAIT: Duration = Duration::from_millis(500);

impl Exchange<'_> {
    /// The next chunk of a body, within the deadline and the byte budget. `Ok(None)` is the end of the body.
    async fn next_chunk(&self, response: &mut Response, budget: &mut usize) -> Result<Option<Bytes>, ReadError> {
        let chunk = match timeout_at(self.deadline, http_client::next_chunk(response.body_mut())).await {
            Err(_) => return Err(ReadError::Deadline),
            Ok(Err(error)) => return Err(ReadError::Broken(error_chain(&error))),
            Ok(Ok(chunk)) => chunk,
        };
        if let Some(chunk) = &chunk {
            *budget = budget.checked_sub(chunk.len()).ok_or(ReadError::TooLarge)?;
        }
        Ok(chunk)
    }

    fn too_large(&self) -> McpError {
        after_delivery(
            AfterDeliveryCause::Malformed,
            format!("the backend's answer exceeded the {} byte limit", self.limit),
        )
    }

    fn read_failed(&self, error: ReadError) -> McpError {
        match error {
            ReadError::Deadline => after_delivery(
                AfterDeliveryCause::Deadline,
                "the deadline passed while waiting for the backend's answer",
            ),
            ReadError::Broken(cause) => {
                after_delivery(AfterDeliveryCause::Ended, format!("reading the backend's answer failed: {cause}"))
            }
            ReadError::TooLarge => self.too_large(),
        }
    }

    /// The body of a JSON answer, undecoded: a small answer arrives in one chunk and is kept where it lies.
    pub(super) async fn read_json(&self, mut response: Response, budget: &mut usize) -> Result<Bytes, McpError> {
        if http_client::content_length(&response).is_some_and(|length| length > *budget as u64) {
            return Err(self.too_large());
        }
        let mut next = async || self.next_chunk(&mut response, budget).await.map_err(|e| self.read_failed(e));
        let first = next().await?.unwrap_or_default();
        let Some(second) = next().await? else { return Ok(first) };
        let mut body = Vec::with_capacity(first.len() + second.len());
        body.extend_from_slice(&first);
        body.extend_from_slice(&second);
        while let Some(chunk) = next().await? {
            body.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(body))
    }

    /// Reads SSE until the response to `id`, resuming the stream when it ends early with an event id.
    pub(super) async fn read_stream(
        &self,
        mut response: Response,
        id: &Value,
        budget: &mut usize,
    ) -> Result<Bytes, McpError> {
        let mut cursor = StreamCursor::default();
        for resumption in 0..=MAX_RESUMPTIONS {
            if resumption > 0 {
                if let Some(span) = self.span {
                    span.resumption(resumption);
                }
                response = self.resume(&cursor).await?;
            }
            if let Some(answer) = self.read_one_stream(&mut response, id, budget, &mut cursor).await? {
                return Ok(answer);
            }
            if let Wire::Modern { .. } = self.wire {
                // 2026-07-28 has no resumption: the request is lost with its stream.
                return Err(after_delivery(
                    AfterDeliveryCause::Ended,
                    "the backend's event stream ended before the response (2026-07-28 streams cannot be resumed)",
                ));
            }
            if cursor.last_event_id.is_empty() {
                return Err(after_delivery(
                    AfterDeliveryCause::Ended,
                    "the backend's event stream ended before the response",
                ));
            }
        }
        Err(after_delivery(
            AfterDeliveryCause::Ended,
            format!("the backend's event stream ended early {} times; gave up resuming", MAX_RESUMPTIONS + 1),
        ))
    }

    /// Reads one HTTP body of events. `Ok(None)`: the body ended (or broke) before the response.
    async fn read_one_stream(
        &self,
        response: &mut Response,
        id: &Value,
        budget: &mut usize,
        cursor: &mut StreamCursor,
    ) -> Result<Option<Bytes>, McpError> {
        let mut decoder = SseDecoder::new(self.limit);
        loop {
            let chunk = match self.next_chunk(response, budget).await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                // A connection that broke mid-stream is resumable like one that ended.
                Err(ReadError::Broken(_)) => break,
                Err(error) => return Err(self.read_failed(error)),
            };
            decoder.feed(&chunk).map_err(|e| {
                after_delivery(AfterDeliveryCause::Malformed, format!("the backend's event stream is invalid: {e}"))
            })?;
            while let Some(event) = decoder.next_event() {
                if let Some(answer) = self.handle_event(event, id).await? {
                    return Ok(Some(answer));
                }
            }
            cursor.remember(&decoder);
        }
        cursor.remember(&decoder);
        Ok(None)
    }

    /// Returns the response when `event` carries it, as its text (no tree of the result is built); answers
    /// server-to-client requests.
    async fn handle_event(&self, event: SseEvent, id: &Value) -> Result<Option<Bytes>, McpError> {
        if event.data.is_empty() {
            return Ok(None); // a priming event: it only carries an id
        }
        let not_json = |e: serde_json::Error| {
            after_delivery(AfterDeliveryCause::Malformed, format!("the backend sent an event that is not JSON: {e}"))
        };
        match response_id(event.data.as_bytes()).map_err(not_json)? {
            Some(answered) if answered == *id => return Ok(Some(Bytes::from(event.data))),
            Some(answered) => {
                if let Some(strays) = self.strays {
                    strays.deliver(&answered, Bytes::from(event.data));
                }
                return Ok(None);
            }
            None => {}
        }
        let message: Value = serde_json::from_str(&event.data).map_err(not_json)?;
        match jsonrpc::kind(&message) {
            Kind::Request { method, .. } if matches!(self.wire, Wire::Modern { .. }) => {
                // 2026-07-28 servers never send requests, and clients never send responses.
                tracing::warn!(method, "a 2026-07-28 backend sent a request on its stream; ignored");
                Ok(None)
            }
            Kind::Request { id: request_id, method } => {
                let (request_id, method) = (request_id.clone(), method.to_owned());
                let reply = self.answer_server_request(&request_id, &method, message).await;
                self.reply(&reply).await;
                Ok(None)
            }
            Kind::Notification { method } => {
                let method = method.to_owned();
                self.notifications.hear(message, &method);
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// Answers a backend's request. A failed answer is not fatal: the exchange's own deadline still bounds us.
    async fn reply(&self, reply: &Value) {
        if let Err(error) = self.deliver(reply).await {
            tracing::warn!(%error, "could not answer a backend's request");
        }
    }

    async fn resume(&self, cursor: &StreamCursor) -> Result<Response, McpError> {
        let wait = cursor.retry.unwrap_or(DEFAULT_RETRY_WAIT).min(MAX_RETRY_WAIT);
        let wake = Instant::now() + wait;
        if wake >= self.deadline {
            return Err(after_delivery(
                AfterDeliveryCause::Deadline,
                "the deadline passed before the event stream could be resumed",
            ));
        }
        tokio::time::sleep_until(wake).await;
        self.open_stream(Some(&cursor.last_event_id)).await.map_err(|error| match error {
            ExchangeError::SessionGone => {
                after_delivery(AfterDeliveryCause::Ended, "the backend ended the session during the call")
            }
            error => after_delivery(
                AfterDeliveryCause::Ended,
                format!("resuming the event stream failed: {}", error.into_error()),
            ),
        })
    }

    /// Reads a standalone stream until it ends, handling every message on it; returns its last event id.
    pub(crate) async fn listen(&self, mut response: Response) -> Option<String> {
        let mut decoder = SseDecoder::new(self.limit);
        let mut budget = usize::MAX;
        while let Ok(Some(chunk)) = self.next_chunk(&mut response, &mut budget).await {
            if decoder.feed(&chunk).is_err() {
                break;
            }
            while let Some(event) = decoder.next_event() {
                if let Err(error) = self.handle_event(event, &Value::Null).await {
                    tracing::warn!(%error, "a backend's standalone stream carried an unusable event");
                }
            }
        }
        Some(decoder.last_event_id().to_owned()).filter(|id| !id.is_empty())
    }
}

/// Why reading a body stopped early.
enum ReadError {
    Deadline,
    Broken(String),
    TooLarge,
}

/// Where a broken stream can be picked up again.
#[derive(Default)]
struct StreamCursor {
    last_event_id: String,
    retry: Option<Duration>,
}

impl StreamCursor {
    fn remember(&mut self, decoder: &SseDecoder) {
        if !decoder.last_event_id().is_empty() {
            decoder.last_event_id().clone_into(&mut self.last_event_id);
        }
        if let Some(ms) = decoder.retry_ms() {
            self.retry = Some(Duration::from_millis(ms));
        }
    }
}

impl Exchange<'_> {
    async fn answer_server_request(&self, id: &Value, method: &str, message: Value) -> Value {
        answer_server_request(self.notifications.relay, self.deadline, id, method, message).await
    }
}
