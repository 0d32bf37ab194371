//! Answers that may carry more than the result (MCP transports §"Sending Messages to the Server"):
//! a request whose backend answers with an event stream, or sends notifications or requests for the agent while
//! it runs, is answered with an SSE stream — a priming event (id, `retry`, empty data), the messages in order as
//! they arrive, keep-alive comments while idle, then the result — with `Cache-Control: no-cache` and
//! `X-Accel-Buffering: no`. A request whose backend answered plain JSON with nothing for the agent on the way is
//! answered with plain JSON, the cheaper form. The result event carries the same text as a JSON answer would
//! ([`super::splice`]: a backend's result spliced in as it came).
//!
//! Rules: a disconnect is not a cancel, so a call outlives the agent's request without a task of its own while it
//! does not need one: the handler polls the call inline ([`Call`]), hands the still-pending call to the SSE pump's
//! task when the first message for the agent arrives, and detaches it to a task of its own when the handler is
//! dropped before the call finished (the agent went away). Event ids are `<stream>-<sequence>` with a random
//! stream id, unique within the session.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use serde_json::Value;
use tokio::sync::mpsc;

use super::http;
use super::pending::PendingRequests;
use super::polled::Call;
use super::replay::{CallLog, Replays, SharedLog};
use super::splice::data_lines;
use crate::mcp::RelayMessage;

/// How long a stream may stay silent before a keep-alive comment is sent.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The messages a backend sends about one call, and how they become what the agent sees.
pub(super) struct Outbox {
    pub(super) messages: mpsc::UnboundedReceiver<RelayMessage>,
    pub(super) pending: Arc<PendingRequests>,
    pub(super) replays: Arc<Replays>,
    pub(super) session: String,
}

/// What the agent's stream gets next: a message, or only the news that the backend streams its answer.
enum Outgoing {
    Message(Value),
    Opened,
}

impl Outbox {
    async fn next(&mut self) -> Option<Outgoing> {
        let message = self.messages.recv().await?;
        Some(self.outgoing(message))
    }

    fn try_next(&mut self) -> Option<Outgoing> {
        let message = self.messages.try_recv().ok()?;
        Some(self.outgoing(message))
    }

    fn outgoing(&self, message: RelayMessage) -> Outgoing {
        self.pending.prepare(&self.session, message).map_or(Outgoing::Opened, Outgoing::Message)
    }
}

/// Waits for the call; answers JSON when it finished without messages for the agent, SSE as soon as one arrives
/// or the backend answers with a stream of its own (so the agent gets the same framing, priming event included).
pub(super) async fn answer(mut call: Call, mut outbox: Outbox) -> Response {
    tokio::select! {
        biased;
        Some(first) = outbox.next() => sse_response(first, outbox, call),
        reply = &mut call => match outbox.try_next() {
            Some(first) => sse_response(first, outbox, Call::new(std::future::ready(reply))),
            None => http::reply(StatusCode::OK, reply),
        },
    }
}

fn sse_response(first: Outgoing, outbox: Outbox, call: Call) -> Response {
    let (live, body) = mpsc::unbounded_channel();
    let stream = new_stream_id();
    let log = outbox.replays.open(&stream, &outbox.session, live);
    let out = EventWriter { sink: Sink::Logged(log), stream, next: 0 };
    tokio::spawn(pump(out, first, outbox, call));
    sse_body(body)
}

/// An SSE response whose events `feed` writes on its own task; the stream ends when `feed` returns or the agent
/// goes away (nothing is kept for a resumption).
pub(super) fn event_stream<F: Future<Output = ()> + Send + 'static>(feed: impl FnOnce(EventWriter) -> F) -> Response {
    let (live, body) = mpsc::unbounded_channel();
    tokio::spawn(feed(EventWriter { sink: Sink::Direct(live), stream: new_stream_id(), next: 0 }));
    sse_body(body)
}

/// The SSE response reading `body`.
pub(super) fn sse_body(body: mpsc::UnboundedReceiver<Bytes>) -> Response {
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no")),
    ];
    (StatusCode::OK, headers, Body::new(ChannelBody(body))).into_response()
}

fn new_stream_id() -> String {
    super::session::SessionRef::random().map(|r| r.to_string()[..12].to_owned()).unwrap_or_default()
}

/// Feeds a call stream: priming event, the backend's messages, keep-alives, the result. It runs until the call
/// is over, whether or not an agent is connected (events are logged for resumption).
async fn pump(mut out: EventWriter, first: Outgoing, mut outbox: Outbox, mut call: Call) {
    let _ = out.priming();
    out.send(first);
    loop {
        tokio::select! {
            biased;
            Some(next) = outbox.next() => out.send(next),
            finished = &mut call => {
                while let Some(next) = outbox.try_next() {
                    out.send(next);
                }
                let _ = out.data(&finished.text());
                break;
            }
            () = tokio::time::sleep(KEEP_ALIVE) => drop(out.comment("keep-alive")),
        }
    }
    if let Sink::Logged(log) = &out.sink {
        CallLog::finish(log);
        outbox.replays.expire(out.stream);
    }
}

/// Writes SSE events with ids `<stream>-<n>`.
pub(super) struct EventWriter {
    sink: Sink,
    stream: String,
    next: u64,
}

/// Where events go: straight to one connection, or into a call's log (and its current connection).
enum Sink {
    Direct(mpsc::UnboundedSender<Bytes>),
    Logged(SharedLog),
}

/// The agent closed the stream.
pub(super) struct Gone;

/// How long an agent waits before resuming a call stream that broke (the SSE `retry` field).
const RETRY_MS: u64 = 1000;

impl EventWriter {
    fn event(&mut self, text: String) -> Result<(), Gone> {
        match &self.sink {
            Sink::Direct(live) => live.send(Bytes::from(text)).map_err(|_| Gone),
            Sink::Logged(log) => {
                CallLog::record(log, Bytes::from(text));
                Ok(())
            }
        }
    }

    pub(super) fn priming(&mut self) -> Result<(), Gone> {
        let id = self.next_id();
        self.event(format!("id: {id}\nretry: {RETRY_MS}\ndata: \n\n"))
    }

    pub(super) fn message(&mut self, message: &Value) -> Result<(), Gone> {
        let id = self.next_id();
        // serde_json never writes a raw newline, so the message is one `data` line.
        self.event(format!("id: {id}\ndata: {message}\n\n"))
    }

    /// An event whose data is the JSON text `text` (a spliced response may span lines; see [`data_lines`]).
    fn data(&mut self, text: &str) -> Result<(), Gone> {
        let id = self.next_id();
        self.event(format!("id: {id}\n{}\n", data_lines(text)))
    }

    /// Writes a call stream's next item (a logged stream never reports `Gone`).
    fn send(&mut self, outgoing: Outgoing) {
        if let Outgoing::Message(message) = outgoing {
            let _ = self.message(&message);
        }
    }

    pub(super) fn comment(&mut self, text: &str) -> Result<(), Gone> {
        let bytes = Bytes::from(format!(": {text}\n\n"));
        match &self.sink {
            Sink::Direct(live) => live.send(bytes).map_err(|_| Gone),
            Sink::Logged(log) => {
                CallLog::pass_through(log, bytes);
                Ok(())
            }
        }
    }

    /// Completes when the agent has gone away (direct streams only; a logged stream outlives its connection).
    pub(super) async fn closed(&self) {
        match &self.sink {
            Sink::Direct(live) => live.closed().await,
            Sink::Logged(_) => std::future::pending().await,
        }
    }

    fn next_id(&mut self) -> String {
        self.next += 1;
        format!("{}-{}", self.stream, self.next - 1)
    }
}

/// A response body fed from a channel; it ends when the sender is dropped.
struct ChannelBody(mpsc::UnboundedReceiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
    }
}
