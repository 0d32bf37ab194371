//! One JSON-RPC exchange with a backend over Streamable HTTP (MCP 2025-11-25, transports §"Sending messages to
//! the server", §"Resumability and redelivery").
//!
//! The response the exchange waits for is handed back as the text it came in (a JSON body kept where it lies, or
//! an event's data), for [`super::response`] to decode without a tree of its result; only the other messages
//! on a stream are parsed.
//!
//! Rules: every POST carries `Accept: application/json, text/event-stream`, `Content-Type: application/json` and
//! `Accept-Encoding: identity`; a response with any other `Content-Encoding` is refused. The answer is one JSON
//! object or an SSE stream read until the response with the request's id; server-to-client requests met on the
//! way are answered (`ping` → `{}`, anything else → -32601) so that the backend does not wait for us. A stream
//! that ends early after carrying an event id is resumed with `GET` + `Last-Event-ID` after its `retry` (capped),
//! at most three times (reading the answer: [`super::reading`]). Everything runs under the caller's absolute
//! deadline, and all bytes read in one exchange, resumptions included, count against one limit.
//!
//! Errors are classified here, where the facts are known: a failure to connect, or an HTTP status that proves the
//! backend refused the request unprocessed ([`Refusal`]), is `NotDelivered`; anything else after the request may
//! have left is `AfterDelivery` (or `HttpStatus`, equally unknown). A refused resumption `GET` never makes the
//! `POST` before it undelivered: [`Exchange::resume`] reclassifies every failure as `AfterDelivery`.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use serde::Serialize;
use serde_json::Value;
use tokio::time::{Instant, timeout_at};

use super::authorize::Refused;
use super::failure::{ExchangeError, after_delivery, classify_send_error, error_chain, excerpt, modern_refusal};
use super::notifications::NotificationRoute;
use super::refusal::Refusal;
use super::strays::Strays;
use crate::backend::http_client::{self, HttpClient, Response};
use crate::backend::mcp_client::endpoint::BackendEndpoint;
use crate::backend::mcp_client::error::{AfterDeliveryCause, McpError, NotDeliveredCause};
use crate::backend::mcp_client::fault::Fault;
use crate::backend::oauth::AccessToken;
use crate::mcp::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER};
use crate::secret::SubjectToken;
use crate::telemetry::trace::ClientSpan;

/// How much of an HTTP error body is read (a JSON-RPC error with its `data`).
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// The header that resumes a stream (transports §"Resumability and redelivery").
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// Which protocol era an exchange speaks, and what that puts on the request.
#[derive(Clone, Copy)]
pub(crate) enum Wire<'a> {
    /// 2025-11-25 and earlier, `initialize`: no session yet, and the answer's headers are kept (for its id).
    Handshake,
    /// 2025-11-25 and earlier, in a session: its `MCP-Session-Id` (if the backend gave one) and negotiated version.
    Session { id: Option<&'a HeaderValue>, version: &'static str },
    /// 2026-07-28: no session; the version and the headers that mirror this request's body.
    Modern { version: &'static str, headers: &'a [(HeaderName, HeaderValue)] },
}

/// A JSON-RPC response, as the text the backend sent (decoded by [`super::response::into_result`]), and the HTTP headers it
/// came with.
pub(crate) struct Answer {
    pub(crate) message: Bytes,
    pub(crate) headers: HeaderMap,
}

/// One exchange's fixed context: where to, in which era and session, until when, on whose behalf, how many bytes
/// at most.
pub(crate) struct Exchange<'a> {
    pub(crate) http: &'a HttpClient,
    pub(crate) endpoint: &'a BackendEndpoint,
    pub(crate) wire: Wire<'a>,
    /// When the exchange fails `AfterDelivery` (`Deadline`) if it has not ended.
    pub(crate) deadline: Instant,
    /// Whose OAuth tokens a protected backend gets; `None` for the gateway's own requests.
    pub(crate) principal: Option<&'a str>,
    /// The agent's verified JWT, for a backend whose tokens are exchanged for it (RFC 8693).
    pub(crate) subject_token: Option<&'a SubjectToken>,
    pub(crate) limit: usize,
    /// Where the backend's notifications about this request go.
    pub(crate) notifications: NotificationRoute<'a>,
    /// Responses that arrive on another stream of the session find their exchange here.
    pub(crate) strays: Option<&'a Strays>,
    /// The request's CLIENT span (for its retry and resumption events), when traces are on.
    pub(crate) span: Option<&'a ClientSpan>,
}

impl Exchange<'_> {
    /// Sends a request (`body`, its encoding) and reads until its response arrives.
    pub(crate) async fn call(&self, id: &Value, body: Bytes) -> Result<Answer, ExchangeError> {
        let Some(strays) = self.strays else { return self.send_and_read(id, body).await };
        let mut stray = strays.watch(id);
        tokio::select! {
            answer = self.send_and_read(id, body) => answer,
            Some(message) = stray.arrival() => Ok(Answer { message, headers: HeaderMap::new() }),
        }
    }

    async fn send_and_read(&self, id: &Value, body: Bytes) -> Result<Answer, ExchangeError> {
        let response = self.post(body).await?;
        // Only the handshake reads the answer's headers (for the session id); other calls skip the copy.
        let handshake = matches!(self.wire, Wire::Handshake);
        let headers = if handshake { response.headers().clone() } else { HeaderMap::new() };
        let mut budget = self.limit;
        let message = match content_type(&response) {
            ContentType::Json => self.read_json(response, &mut budget).await?,
            ContentType::EventStream => {
                if let Some(relay) = self.notifications.relay {
                    relay.stream_opened();
                }
                // Boxed: inline, reading an event stream (and resuming it) would size every call's future.
                Box::pin(self.read_stream(response, id, &mut budget)).await?
            }
            ContentType::Other(other) => {
                return Err(after_delivery(
                    AfterDeliveryCause::Malformed,
                    format!("the backend answered with Content-Type `{other}`"),
                )
                .into());
            }
        };
        Ok(Answer { message, headers })
    }

    /// Sends a `subscriptions/listen` request and returns its event stream, which stays open.
    pub(crate) async fn open_listen(&self, message: &Value) -> Result<Response, ExchangeError> {
        let response = self.post(encode(message)?).await?;
        match content_type(&response) {
            ContentType::EventStream => Ok(response),
            _ => Err(after_delivery(
                AfterDeliveryCause::Malformed,
                "the backend answered subscriptions/listen without an event stream",
            )
            .into()),
        }
    }

    /// Sends a notification or a response; the backend must accept it (any 2xx, normally 202).
    pub(crate) async fn deliver(&self, message: &Value) -> Result<(), ExchangeError> {
        self.post(encode(message)?).await.map(drop)
    }

    /// POSTs `body`; a retry after an OAuth refusal resends the same bytes.
    async fn post(&self, body: Bytes) -> Result<Response, ExchangeError> {
        let Some(oauth) = self.endpoint.oauth() else {
            return self.check_status(self.send_post(body, None).await?).await;
        };
        let principal = oauth.principal(self.principal).await?;
        let first = oauth.before(&principal, self.subject_token).await?;
        let response = self.send_post(body.clone(), first.as_ref()).await?;
        let Some(refused) = Refused::of(&response) else { return self.check_status(response).await };
        // 401 and 403 prove the backend did not process the request, so it is sent again, once, with a new token.
        let second = oauth.after(&principal, self.subject_token, &refused, first.as_ref()).await?;
        if let Some(span) = self.span {
            span.retry("authorization");
        }
        let response = self.send_post(body, Some(&second)).await?;
        if Refused::of(&response).is_some() {
            let status = response.status().as_u16();
            return Err(McpError::NotDelivered {
                cause: NotDeliveredCause::Authorization,
                reason: format!("the backend refused a freshly obtained OAuth token too (HTTP {status}); not retried")
                    .into(),
            }
            .into());
        }
        self.check_status(response).await
    }

    async fn send_post(&self, body: Bytes, token: Option<&AccessToken>) -> Result<Response, ExchangeError> {
        let mut headers = self.endpoint.post_headers().clone();
        self.add_wire_headers(&mut headers);
        if let Some(token) = token {
            headers.append(header::AUTHORIZATION, token.authorization().clone());
        }
        let request = http_client::request(Method::POST, self.uri()?, headers, body);
        match timeout_at(self.deadline, self.http.send(request)).await {
            Err(_) => {
                Err(after_delivery(AfterDeliveryCause::Deadline, "the deadline passed while sending the request")
                    .into())
            }
            Ok(Err(error)) => Err(classify_send_error(&error).into()),
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// The stored OAuth token for a `GET` (no refusal handling: a refused stream is not a refused call).
    async fn stream_token(&self) -> Option<AccessToken> {
        let oauth = self.endpoint.oauth()?;
        let principal = oauth.principal(self.principal).await.ok()?;
        oauth.before(&principal, self.subject_token).await.ok().flatten()
    }

    /// The backend's URI; a URL that is none fails every exchange before anything is sent.
    fn uri(&self) -> Result<&http::Uri, McpError> {
        self.endpoint.uri().map_err(|reason| McpError::NotDelivered {
            cause: NotDeliveredCause::Connect,
            reason: reason.to_owned().into(),
        })
    }

    /// What the era and session put on every request, after the backend's own headers.
    fn add_wire_headers(&self, headers: &mut HeaderMap) {
        match self.wire {
            Wire::Handshake => {}
            Wire::Session { id, version } => {
                if let Some(id) = id {
                    headers.append(SESSION_ID_HEADER, id.clone());
                }
                headers.append(PROTOCOL_VERSION_HEADER, HeaderValue::from_static(version));
            }
            Wire::Modern { version, headers: mirrored } => {
                headers.append(PROTOCOL_VERSION_HEADER, HeaderValue::from_static(version));
                for (name, value) in mirrored {
                    headers.append(name, value.clone());
                }
            }
        }
    }

    async fn check_status(&self, response: Response) -> Result<Response, ExchangeError> {
        let status = response.status();
        let had_session_id = matches!(self.wire, Wire::Session { id: Some(_), .. });
        if status == StatusCode::NOT_FOUND && had_session_id {
            return Err(ExchangeError::SessionGone);
        }
        if !status.is_success() {
            let body = self.error_body(response).await;
            if let Wire::Modern { .. } = self.wire {
                return Err(modern_refusal(status.as_u16(), &body));
            }
            let body = excerpt(&body);
            let error = match Refusal::of(status.as_u16()) {
                Some(refusal) => McpError::NotDelivered {
                    cause: NotDeliveredCause::Refused,
                    reason: Fault::status(refusal.status(), &body),
                },
                None => McpError::HttpStatus { status: status.as_u16(), body },
            };
            return Err(error.into());
        }
        if let Some(encoding) = response.headers().get(header::CONTENT_ENCODING)
            && !encoding.as_bytes().eq_ignore_ascii_case(b"identity")
        {
            let encoding = String::from_utf8_lossy(encoding.as_bytes()).into_owned();
            return Err(after_delivery(
                AfterDeliveryCause::Malformed,
                format!("the backend answered with Content-Encoding `{encoding}` although identity was asked for"),
            )
            .into());
        }
        Ok(response)
    }

    /// The start of an error answer's body: enough for a JSON-RPC error (modern backends answer with one).
    async fn error_body(&self, mut response: Response) -> Vec<u8> {
        let mut body = Vec::new();
        while body.len() < ERROR_BODY_LIMIT {
            match timeout_at(self.deadline, http_client::next_chunk(response.body_mut())).await {
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        body
    }

    /// `GET` on the endpoint: the session's standalone stream, or (with `last_event_id`) the rest of a stream.
    pub(crate) async fn open_stream(&self, last_event_id: Option<&str>) -> Result<Response, ExchangeError> {
        let mut headers = self.endpoint.common_headers().clone();
        self.add_wire_headers(&mut headers);
        headers.append(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(last_event_id) = last_event_id {
            let value = HeaderValue::from_str(last_event_id).map_err(|_| {
                after_delivery(AfterDeliveryCause::Ended, "the backend's last event id cannot be sent back in a header")
            })?;
            headers.append(LAST_EVENT_ID, value);
        }
        if let Some(token) = self.stream_token().await {
            headers.append(header::AUTHORIZATION, token.authorization().clone());
        }
        let request = http_client::request(Method::GET, self.uri()?, headers, Bytes::new());
        let response = match timeout_at(self.deadline, self.http.send(request)).await {
            Err(_) => {
                return Err(after_delivery(
                    AfterDeliveryCause::Deadline,
                    "the deadline passed while opening the event stream",
                )
                .into());
            }
            Ok(Err(error)) => {
                return Err(after_delivery(
                    AfterDeliveryCause::Ended,
                    format!("opening the event stream failed: {}", error_chain(&error)),
                )
                .into());
            }
            Ok(Ok(response)) => response,
        };
        let response = self.check_status(response).await?;
        match content_type(&response) {
            ContentType::EventStream => Ok(response),
            _ => Err(after_delivery(AfterDeliveryCause::Malformed, "the backend answered GET without an event stream")
                .into()),
        }
    }
}

enum ContentType {
    Json,
    EventStream,
    Other(String),
}

fn content_type(response: &Response) -> ContentType {
    let value = response.headers().get(header::CONTENT_TYPE).map(HeaderValue::as_bytes).unwrap_or_default();
    let essence = value.split(|&b| b == b';').next().unwrap_or_default().trim_ascii();
    if essence.eq_ignore_ascii_case(b"application/json") {
        ContentType::Json
    } else if essence.eq_ignore_ascii_case(b"text/event-stream") {
        ContentType::EventStream
    } else {
        ContentType::Other(String::from_utf8_lossy(value).into_owned())
    }
}

/// A message's bytes, once: a resend after a refusal sends them again.
pub(crate) fn encode(message: &impl Serialize) -> Result<Bytes, McpError> {
    let bytes = serde_json::to_vec(message)
        .map_err(|e| McpError::NotDelivered { cause: NotDeliveredCause::Encode, reason: e.to_string().into() })?;
    Ok(Bytes::from(bytes))
}
