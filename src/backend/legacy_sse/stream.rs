//! The backend's event stream (2024-11-05 transports §"HTTP with SSE"): one `GET` with
//! `Accept: text/event-stream`, whose first event must be `endpoint`, naming the URI to POST messages to; every
//! later `message` event carries one JSON-RPC message.
//!
//! Rules:
//! - Opening the stream and reading the `endpoint` event happen under the caller's deadline and within
//!   [`MAX_EXCHANGE_BYTES`]; every failure there is `NotDelivered` (nothing of the caller's was sent yet).
//! - The endpoint is a URI reference resolved against the stream's URL. One on another origin (scheme, host,
//!   port) is refused: the credential goes only to the configured origin.
//! - Events with empty data (priming, keep-alive) are skipped; events other than `message` after the endpoint are
//!   logged and skipped. One event is bounded by the decoder's limit; the stream itself lives as long as the
//!   session, and its end, a read error or an oversized event ends the session.

use bytes::Bytes;
use http::Method;
use http::header::{self, HeaderMap, HeaderValue};
use reqwest::Url;
use tokio::time::{Instant, timeout_at};

use crate::backend::duplex::MessageSource;
use crate::backend::event_stream::{SseDecoder, SseEvent};
use crate::backend::http_client::{self, HttpClient, Response};
use crate::backend::mcp_client::{Fault, NotDeliveredCause};
use crate::backend::mcp_client::{MAX_EXCHANGE_BYTES, McpError, connect_fault, error_chain};

/// An open event stream whose `endpoint` event has been read.
pub(super) struct EventStream {
    response: Response,
    decoder: SseDecoder,
}

fn not_delivered(cause: NotDeliveredCause, reason: impl Into<Fault>) -> McpError {
    McpError::NotDelivered { cause, reason: reason.into() }
}

/// Opens the stream at `url` with `headers` and returns it with the endpoint for messages.
pub(super) async fn open(
    http: &HttpClient,
    url: &Url,
    headers: &HeaderMap,
    deadline: Instant,
) -> Result<(EventStream, Url), McpError> {
    let uri = http_client::uri_of(url).map_err(|reason| not_delivered(NotDeliveredCause::Connect, reason))?;
    let mut headers = headers.clone();
    headers.append(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
    headers.append(header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    headers.append(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    let request = http_client::request(Method::GET, &uri, headers, Bytes::new());
    let response = match timeout_at(deadline, http.send(request)).await {
        Err(_) => {
            return Err(not_delivered(
                NotDeliveredCause::Connect,
                "the deadline passed while opening the backend's SSE stream",
            ));
        }
        Ok(Err(error)) => return Err(not_delivered(NotDeliveredCause::Connect, connect_fault(&error))),
        Ok(Ok(response)) => response,
    };
    check_stream(&response)?;
    let mut stream = EventStream { response, decoder: SseDecoder::new(MAX_EXCHANGE_BYTES) };
    let data = timeout_at(deadline, stream.endpoint_event())
        .await
        .map_err(|_| {
            not_delivered(
                NotDeliveredCause::Handshake,
                "the deadline passed before the backend's SSE stream sent its `endpoint` event",
            )
        })?
        .map_err(|reason| not_delivered(NotDeliveredCause::Handshake, reason))?;
    let endpoint = same_origin_endpoint(url, &data)?;
    Ok((stream, endpoint))
}

fn check_stream(response: &Response) -> Result<(), McpError> {
    let status = response.status();
    if !status.is_success() {
        return Err(not_delivered(
            NotDeliveredCause::Connect,
            format!("the backend answered the SSE stream's GET with HTTP {status}"),
        ));
    }
    let value = |name| response.headers().get(name).map(HeaderValue::as_bytes).unwrap_or_default();
    let content_type = value(header::CONTENT_TYPE);
    let essence = content_type.split(|&byte| byte == b';').next().unwrap_or_default().trim_ascii();
    if !essence.eq_ignore_ascii_case(b"text/event-stream") {
        let shown = String::from_utf8_lossy(content_type);
        return Err(not_delivered(
            NotDeliveredCause::Handshake,
            format!("the backend's SSE stream has Content-Type `{shown}`"),
        ));
    }
    let encoding = value(header::CONTENT_ENCODING);
    if !encoding.is_empty() && !encoding.eq_ignore_ascii_case(b"identity") {
        let shown = String::from_utf8_lossy(encoding);
        return Err(not_delivered(
            NotDeliveredCause::Handshake,
            format!("the backend's SSE stream has Content-Encoding `{shown}`"),
        ));
    }
    Ok(())
}

/// The endpoint named by the `endpoint` event's `data`, resolved against the stream's URL, if on its origin.
fn same_origin_endpoint(stream: &Url, data: &str) -> Result<Url, McpError> {
    let endpoint = stream.join(data.trim()).map_err(|error| {
        not_delivered(
            NotDeliveredCause::Handshake,
            format!("the backend's `endpoint` event is not a URI reference ({error})"),
        )
    })?;
    if endpoint.origin() != stream.origin() {
        return Err(not_delivered(
            NotDeliveredCause::Handshake,
            format!(
                "the backend's `endpoint` event names another origin ({}); messages and the credential go only to {}",
                endpoint.origin().ascii_serialization(),
                stream.origin().ascii_serialization()
            ),
        ));
    }
    Ok(endpoint)
}

impl EventStream {
    /// The data of the first event, which must be `endpoint`; `Err` is why not.
    async fn endpoint_event(&mut self) -> Result<String, String> {
        let mut budget = MAX_EXCHANGE_BYTES;
        let event = self.next_event(&mut budget).await?;
        if event.event != "endpoint" {
            let name = if event.event.is_empty() { "message" } else { &event.event };
            return Err(format!("the backend's SSE stream began with a `{name}` event instead of `endpoint`"));
        }
        Ok(event.data)
    }

    /// The next event with data; `budget` bounds the bytes read for it.
    async fn next_event(&mut self, budget: &mut usize) -> Result<SseEvent, String> {
        loop {
            while let Some(event) = self.decoder.next_event() {
                if !event.data.is_empty() {
                    return Ok(event);
                }
            }
            let chunk = match http_client::next_chunk(self.response.body_mut()).await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return Err("the backend closed its SSE stream".into()),
                Err(error) => return Err(format!("the backend's SSE stream broke: {}", error_chain(&error))),
            };
            *budget = budget.checked_sub(chunk.len()).ok_or_else(|| {
                format!("the backend's SSE stream sent more than {MAX_EXCHANGE_BYTES} bytes without an event")
            })?;
            self.decoder.feed(&chunk).map_err(|error| format!("the backend's SSE stream is unusable: {error}"))?;
        }
    }
}

impl MessageSource for EventStream {
    async fn receive(&mut self) -> Result<Vec<u8>, Fault> {
        // The stream lives as long as the session, so its length is not bounded; the decoder bounds each event.
        let mut unbounded = usize::MAX;
        loop {
            let event = self.next_event(&mut unbounded).await.map_err(Fault::Other)?;
            match event.event.as_str() {
                "" | "message" => return Ok(event.data.into_bytes()),
                other => tracing::debug!(event = other, "skipping an event that is not a message"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_resolves_against_the_stream_and_stays_on_its_origin() {
        let stream = Url::parse("http://127.0.0.1:9000/mcp/sse").unwrap();
        let resolved = |data: &str| same_origin_endpoint(&stream, data).map(|url| url.to_string());
        assert_eq!(resolved("/message?sessionId=a").unwrap(), "http://127.0.0.1:9000/message?sessionId=a");
        assert_eq!(resolved(" messages?s=1\n").unwrap(), "http://127.0.0.1:9000/mcp/messages?s=1");
        assert_eq!(resolved("http://127.0.0.1:9000/m").unwrap(), "http://127.0.0.1:9000/m");
        for foreign in ["http://127.0.0.1:9001/m", "https://127.0.0.1:9000/m", "http://localhost:9000/m", "//evil/m"] {
            let refused = same_origin_endpoint(&stream, foreign).unwrap_err();
            assert!(refused.proves_not_delivered() && refused.to_string().contains("another origin"), "{foreign}");
        }
    }
}
