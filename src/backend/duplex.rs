//! One MCP client session over a pair of message channels, whatever carries them: the JSON-RPC half of the
//! stdio transport and of the legacy HTTP+SSE transport (MCP 2025-11-25 `basic/lifecycle`, `utilities/ping`,
//! `utilities/cancellation`, `utilities/progress`).
//!
//! Owns: request ids (numbered per session, so agents' ids never reach the backend), the table of requests waiting
//! for their response (matched by id), the handshake (`initialize` then `notifications/initialized`, under the
//! caller's deadline), the progress-token swap, server-to-client requests (`ping` → `{}`, relayed when the agent
//! declared the capability, else -32601; shared code with the HTTP client), notifications relayed, cancellation
//! (`notifications/cancelled` with the session's own id when a call is cancelled or times out), and the error
//! classes of everything after the message left.
//!
//! A transport gives a [`MessageSink`] (send one message; its error says whether any of it may have reached the
//! backend) and a [`MessageSource`] (the next message; its error is why the channel ended). The session reads the
//! source on its own task until the channel ends or the session is ended ([`Duplex::end`]). Callers use the
//! session through [`DuplexConnection`], which each transport's connection dereferences to.
//!
//! A response is handed to its caller as the bytes it arrived as ([`into_result`] decodes it without a tree of
//! its result); every other message is parsed.
//!
//! Error classes keep at most once: `NotDelivered` only when the sink proves no byte of the request reached the
//! backend, or the session had already ended before the request was sent; once the request may have been
//! received, the channel ending, a timeout or a garbled message is `AfterDelivery`. A session that ended stays
//! ended (the caller starts a new one); the calls in flight in it are never repeated.
//!
//! Messages not addressed to a call (server-to-client requests, log notifications) go to the newest call in flight
//! when the session serves one agent session ([`Sharing::PerAgent`]); a shared session relays only what can be
//! attributed (progress, by token). With no call in flight they go to the session's [`Standing`] relay (the agent
//! session's, as the HTTP client's standalone stream does), and every `notifications/*/list_changed` is announced
//! through it, so that the catalog refreshes.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, timeout_at};

use crate::backend::mcp_client::{AfterDeliveryCause, Fault, NotDeliveredCause};
use crate::backend::mcp_client::{
    McpError, NotificationRoute, Relay, answer_server_request, into_result, request_params, response_id,
    swap_progress_token,
};
use crate::mcp::jsonrpc::{self, Kind};
use crate::mcp::method;
use crate::raw_json::RawJson;

mod opening;

pub use opening::Opening;
use opening::{ModernDuplex, Opened};

/// How much of a bad message is quoted in the log and the error.
const EXCERPT: usize = 200;
/// How long a request whose send failed waits for the session's end, to report why it ended.
const END_WAIT: Duration = Duration::from_secs(3);
/// How long an agent may take to answer a server-to-client request that came outside any call.
const STANDING_ANSWER_WAIT: Duration = Duration::from_secs(600);

/// Whether a session serves one agent session or all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sharing {
    /// One session per (agent session, backend).
    #[default]
    PerAgent,
    /// One session for every agent session (the operator declared the server stateless).
    Shared,
}

/// One message being sent; `Err` is `NotDelivered` only when no byte of it reached the backend.
pub(crate) type Sending<'a> = Pin<Box<dyn Future<Output = Result<(), McpError>> + Send + 'a>>;

/// Writes one JSON-RPC message to the backend.
pub(crate) trait MessageSink: Send + Sync + 'static {
    /// Sends `message` before `deadline`.
    fn send<'a>(&'a self, message: &'a Value, deadline: Instant) -> Sending<'a>;

    /// Sends a message nobody waits for (a notification, an answer to the backend's request) in the background.
    /// Where the channel is ordered, it takes its place behind every message sent before.
    fn notify(&self, message: Value);
}

/// Reads the backend's messages, one at a time.
pub(crate) trait MessageSource: Send + 'static {
    /// The next message's bytes (one JSON value); `Err` says why the channel ended.
    fn receive(&mut self) -> impl Future<Output = Result<Vec<u8>, Fault>> + Send;
}

/// Who is on the other end, for attribution and for messages.
#[derive(Clone)]
pub(crate) struct Peer {
    pub(crate) backend: Arc<str>,
    /// Names the session in errors, e.g. "the backend process".
    pub(crate) what: &'static str,
    pub(crate) sharing: Sharing,
    pub(crate) standing: Standing,
}

/// Told the method of a `notifications/*/list_changed`.
pub type Announce = Arc<dyn Fn(&str) + Send + Sync>;

/// Where a session's messages that belong to no call go.
#[derive(Clone, Default)]
pub struct Standing {
    /// The agent session's relay for what comes outside its calls (a per-agent session only; `None`: dropped, and
    /// server-to-client requests answered as for an agent without capabilities).
    pub relay: Option<Relay>,
    /// Told the method of every `notifications/*/list_changed`.
    pub list_changed: Option<Announce>,
}

/// An MCP session whose handshake is done, over any transport: what the stdio and legacy SSE connections offer
/// their callers (they dereference to it). Dropping it ends the session.
pub struct DuplexConnection {
    duplex: Arc<Duplex>,
    version: &'static str,
    capabilities: Value,
    /// Set when the backend speaks 2026-07-28.
    modern: Option<ModernDuplex>,
}

impl DuplexConnection {
    /// Completes once the session has ended (for a stdio process: once it has exited and been reaped).
    pub(crate) fn ended(&self) -> impl Future<Output = ()> + Send + 'static {
        let duplex = Arc::clone(&self.duplex);
        async move { duplex.closed().await }
    }

    /// Starts the session as `opening` says (a `server/discover` probe, `initialize` offering the agent's client
    /// `capabilities` then `notifications/initialized`, or both), before `deadline`. Every failure is
    /// `NotDelivered` (no request of the caller was sent yet) and ends the session.
    pub(crate) async fn establish(
        duplex: Arc<Duplex>,
        capabilities: &Value,
        opening: Opening,
        deadline: Instant,
    ) -> Result<DuplexConnection, McpError> {
        let what = duplex.peer.what;
        let failure = match timeout_at(deadline, duplex.open(opening, capabilities, deadline)).await {
            Ok(Ok(Opened { version, capabilities, modern })) => {
                let modern = modern.then(ModernDuplex::default);
                if let Some(modern) = &modern {
                    modern.listen(&duplex, version, &capabilities, &[]);
                }
                return Ok(DuplexConnection { duplex, version, capabilities, modern });
            }
            // The root cause, once: a session that ended keeps the reason it ended for.
            Ok(Err(error)) => error.into_fault(),
            Err(_) => Fault::Other(format!("{what} did not complete the MCP handshake within the deadline")),
        };
        duplex.end(failure.clone());
        Err(not_delivered(NotDeliveredCause::Handshake, failure))
    }

    /// Sends one request and returns its JSON-RPC `result` as the text the backend sent (no tree is built);
    /// `params` of `Value::Null` are omitted. The backend's messages about the request go to `relay`; the agent may
    /// cancel through it. To a 2026-07-28 backend the request carries the modern `_meta`, and the methods that
    /// revision removed are answered here.
    pub async fn request_raw(
        &self,
        method: &str,
        params: Value,
        relay: &Relay,
        deadline: Instant,
    ) -> Result<RawJson, McpError> {
        let Some(modern) = &self.modern else { return self.duplex.request(method, params, relay, deadline).await };
        let params = (!params.is_null()).then_some(params);
        if let Some(applied) = modern.asked.apply(method, params.as_ref(), &self.capabilities) {
            if let Some(uris) = applied? {
                modern.listen(&self.duplex, self.version, &self.capabilities, &uris);
            }
            return Ok(RawJson::of(&json!({})));
        }
        let params = request_params(params, self.version, relay.capabilities(), modern.asked.log_level());
        self.duplex.request(method, params, relay, deadline).await
    }

    /// Whether the backend speaks 2026-07-28 (no handshake was made).
    pub fn is_modern(&self) -> bool {
        self.modern.is_some()
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> &'static str {
        self.version
    }

    /// The server capabilities from the backend's `InitializeResult`.
    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }

    /// Whether the session can still take requests.
    pub fn is_alive(&self) -> bool {
        self.duplex.ended_reason().is_none()
    }
}

impl Drop for DuplexConnection {
    fn drop(&mut self) {
        // The transport's tasks see the session end and stop (close the stream, stop the process).
        self.duplex.end(Fault::ClosedByGateway);
    }
}

/// A live session; shared by the transport's connection and the tasks reading and answering for it.
pub(crate) struct Duplex {
    peer: Peer,
    next_id: AtomicU64,
    state: Mutex<State>,
    sink: Box<dyn MessageSink>,
    /// Becomes `true` once the session ended.
    ended: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    /// Why the session ended, once it has.
    ended: Option<Fault>,
    /// Requests waiting for their response, by the session's id (newest last).
    calls: BTreeMap<u64, InFlight>,
}

struct InFlight {
    /// The response's text, decoded by the caller ([`into_result`]: no tree of its result).
    answer: oneshot::Sender<Vec<u8>>,
    relay: Relay,
    /// The caller's progress token, when it sent one.
    theirs: Option<Value>,
    deadline: Instant,
}

fn not_delivered(cause: NotDeliveredCause, reason: impl Into<Fault>) -> McpError {
    McpError::NotDelivered { cause, reason: reason.into() }
}

fn after_delivery(cause: AfterDeliveryCause, reason: impl Into<Fault>) -> McpError {
    McpError::AfterDelivery { cause, reason: reason.into() }
}

impl Duplex {
    /// Starts a session that writes to `sink` and reads `source` on its own task.
    pub(crate) fn start(peer: Peer, sink: impl MessageSink, source: impl MessageSource) -> Arc<Self> {
        let duplex = Arc::new(Duplex {
            peer,
            next_id: AtomicU64::new(1),
            state: Mutex::default(),
            sink: Box::new(sink),
            ended: watch::channel(false).0,
        });
        tokio::spawn(Arc::clone(&duplex).read(source));
        duplex
    }

    /// Sends one request and returns its JSON-RPC `result`; `params` of `Value::Null` are omitted. The backend's
    /// messages about the request go to `relay`; the agent may cancel through it.
    async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        relay: &Relay,
        deadline: Instant,
    ) -> Result<RawJson, McpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let ours = Value::from(id);
        let mut params = (!params.is_null()).then_some(params);
        let theirs = swap_progress_token(&mut params, &ours);
        let message = jsonrpc::request(&ours, method, params);
        let (answer, answered) = oneshot::channel();
        let call = InFlight { answer, relay: relay.clone(), theirs, deadline };
        let _registered = self.register(id, call)?;
        if let Err(error) = self.sink.send(&message, deadline).await {
            return Err(self.explain(error, deadline).await);
        }
        let cancelled = async {
            match relay.cancel() {
                Some(cancel) => cancel.notified().await,
                None => std::future::pending().await,
            }
        };
        let what = self.peer.what;
        tokio::select! {
            answer = timeout_at(deadline, answered) => match answer {
                Ok(Ok(message)) => into_result(&message),
                Ok(Err(_)) => Err(after_delivery(
                    AfterDeliveryCause::Ended,
                    self.ended_reason().unwrap_or_else(|| format!("{what} ended before answering").into()),
                )),
                Err(_) => {
                    self.cancel(id, "the gateway's deadline for the request passed");
                    Err(after_delivery(AfterDeliveryCause::Deadline, format!("the deadline passed before {what} answered")))
                }
            },
            () = cancelled => {
                self.cancel(id, "cancelled by the agent");
                Err(McpError::Cancelled)
            }
        }
    }

    /// Why the session ended, once it has.
    fn ended_reason(&self) -> Option<Fault> {
        self.state.lock().ended.clone()
    }

    /// A send that failed because the channel broke under it: the reason the session ends for is the root cause
    /// (a process's exit, which its transport learns a moment later), so it is awaited, up to [`END_WAIT`].
    async fn explain(&self, error: McpError, deadline: Instant) -> McpError {
        let broke = matches!(
            error,
            McpError::NotDelivered { cause: NotDeliveredCause::SessionEnded, .. }
                | McpError::AfterDelivery { cause: AfterDeliveryCause::Ended, .. }
        );
        if !broke {
            return error;
        }
        let _ = timeout_at(deadline.min(Instant::now() + END_WAIT), self.closed()).await;
        match (error, self.ended_reason()) {
            (McpError::NotDelivered { cause, .. }, Some(reason)) => McpError::NotDelivered { cause, reason },
            (McpError::AfterDelivery { cause, .. }, Some(reason)) => McpError::AfterDelivery { cause, reason },
            (error, _) => error,
        }
    }

    /// Ends the session (the first reason wins): every waiting call fails as `AfterDelivery`, later requests are
    /// refused as `NotDelivered`, and [`closed`](Self::closed) completes.
    pub(crate) fn end(&self, reason: Fault) {
        let calls = {
            let mut state = self.state.lock();
            state.ended.get_or_insert(reason);
            std::mem::take(&mut state.calls)
        };
        // Their callers see the answer channel close.
        drop(calls);
        self.ended.send_replace(true);
    }

    /// Completes once the session has ended.
    pub(crate) async fn closed(&self) {
        let mut ended = self.ended.subscribe();
        // The sender lives as long as `self`, so waiting cannot fail while we are borrowed.
        let _ = ended.wait_for(|ended| *ended).await;
    }

    fn register(&self, id: u64, call: InFlight) -> Result<Registered<'_>, McpError> {
        let mut state = self.state.lock();
        if let Some(reason) = &state.ended {
            return Err(not_delivered(NotDeliveredCause::SessionEnded, reason.clone()));
        }
        state.calls.insert(id, call);
        Ok(Registered { duplex: self, id })
    }

    fn cancel(&self, id: u64, reason: &str) {
        let params = json!({"requestId": id, "reason": reason});
        self.sink.notify(jsonrpc::notification(method::CANCELLED, Some(params)));
    }

    /// Reads the source until the channel ends, the session is ended, or the backend sends something that is not
    /// a JSON-RPC message.
    async fn read(self: Arc<Self>, mut source: impl MessageSource) {
        let reason = loop {
            let received = tokio::select! {
                () = self.closed() => return,
                received = source.receive() => received,
            };
            let outcome = received.and_then(|bytes| self.receive(bytes).map_err(Fault::Other));
            if let Err(reason) = outcome {
                // A process's end is logged by its supervisor, and reported by whoever it fails.
                if !matches!(reason, Fault::ProcessEnded(_)) {
                    tracing::warn!(backend = %self.peer.backend, %reason, "ending a backend session");
                }
                break reason;
            }
        };
        self.end(reason);
    }

    /// Handles one message; `Err` is why the session must end. A response goes to its caller as the text it
    /// arrived as; only other messages are parsed into a tree.
    fn receive(self: &Arc<Self>, bytes: Vec<u8>) -> Result<(), String> {
        let what = self.peer.what;
        let not_json = |error| format!("{what} sent a message that is not JSON ({error}): {}", excerpt(&bytes));
        if let Some(id) = response_id(&bytes).map_err(not_json)? {
            match id.as_u64().and_then(|id| self.state.lock().calls.remove(&id)) {
                Some(call) => drop(call.answer.send(bytes)),
                None => tracing::debug!(backend = %self.peer.backend, %id, "a response nobody waits for (any more)"),
            }
            return Ok(());
        }
        let message: Value = serde_json::from_slice(&bytes).map_err(not_json)?;
        match jsonrpc::kind(&message) {
            Kind::Request { id, method } => self.answer_request(id.clone(), method.to_owned(), message.clone()),
            Kind::Notification { method } => self.hear(&message, method),
            Kind::Response { .. } | Kind::Invalid => {
                return Err(format!("{what} sent something that is not a JSON-RPC message: {}", excerpt(&bytes)));
            }
        }
        Ok(())
    }

    /// Where a message not addressed to a call goes: the newest call in flight (per-agent sessions only), else
    /// the standing relay; with the time its agent has to answer.
    fn attributable_relay(&self) -> Option<(Relay, Instant)> {
        if self.peer.sharing == Sharing::Shared {
            return None;
        }
        let newest = self.state.lock().calls.values().next_back().map(|call| (call.relay.clone(), call.deadline));
        newest.or_else(|| Some((self.peer.standing.relay.clone()?, Instant::now() + STANDING_ANSWER_WAIT)))
    }

    fn answer_request(self: &Arc<Self>, id: Value, method: String, message: Value) {
        let duplex = Arc::clone(self);
        let (relay, deadline) = match self.attributable_relay() {
            Some((relay, deadline)) => (Some(relay), deadline),
            None => (None, Instant::now()),
        };
        // The agent may take until the call's deadline to answer; the source must keep being read meanwhile.
        tokio::spawn(async move {
            let reply = answer_server_request(relay.as_ref(), deadline, &id, &method, message).await;
            duplex.sink.notify(reply);
        });
    }

    fn hear(&self, message: &Value, method: &str) {
        if method == method::PROGRESS {
            let token = message.pointer("/params/progressToken").and_then(Value::as_u64);
            let call = token.and_then(|token| {
                let state = self.state.lock();
                let call = state.calls.get(&token)?;
                Some((call.relay.clone(), call.theirs.clone()?))
            });
            if let (Some(token), Some((relay, theirs))) = (token, call) {
                let ours = Value::from(token);
                let route =
                    NotificationRoute { relay: Some(&relay), progress: Some((&ours, &theirs)), list_changed: None };
                route.hear(message.clone(), method);
            }
            return;
        }
        let relay = self.attributable_relay().map(|(relay, _)| relay);
        let list_changed =
            self.peer.standing.list_changed.as_deref().map(|announce| announce as &(dyn Fn(&str) + Sync));
        NotificationRoute { relay: relay.as_ref(), progress: None, list_changed }.hear(message.clone(), method);
    }
}

/// Removes a call from the table when its caller stops waiting, however it stops.
struct Registered<'a> {
    duplex: &'a Duplex,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.duplex.state.lock().calls.remove(&self.id);
    }
}

fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(EXCERPT)]).into_owned();
    if bytes.len() > EXCERPT { format!("{text}…") } else { text }
}
