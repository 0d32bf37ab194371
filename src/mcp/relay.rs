//! How messages a backend sends about an agent's request reach that agent:
//! the [`Relay`] a caller hands the backend client with each request, the [`RelayMessage`]s it
//! delivers, and the [`SessionMessage`]s that arrive on a backend session's standalone stream.
//!
//! Rules: a server-to-client request is relayed only when the agent declared the capability its method needs
//! (`sampling`, `elicitation`, `roots`); a caller that stopped listening never stops the call.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};

use super::{SessionHolder, method};

/// The agent's side of a request: the client capabilities the agent declared (backend sessions are initialized
/// with them), and where the backend's messages about the request go while it runs — progress and log
/// notifications, and server-to-client requests the agent declared it can answer (`sampling`, `elicitation`,
/// `roots`). The progress token the caller put in `params._meta.progressToken` is replaced by one of the
/// client's own on the way to the backend and restored on the way back, so tokens never collide within a
/// backend session.
#[derive(Debug, Clone, Default)]
pub struct Relay {
    capabilities: Value,
    sink: Option<mpsc::UnboundedSender<RelayMessage>>,
    /// Notified when the agent cancels the request (`notifications/cancelled`).
    cancel: Option<Arc<Notify>>,
    /// Why this agent cannot be asked anything, told to a backend that sends it a request anyway (`None`: the
    /// agent could be asked, had it declared the capability; the backend hears "method not found").
    refusal: Option<&'static str>,
    /// Whether the request needs the backend session's standalone stream whatever the agent declared (a
    /// passthrough task's status notifications arrive there).
    standalone: bool,
}

/// A message from a backend for the agent.
#[derive(Debug)]
pub enum RelayMessage {
    Notification(Value),
    /// A server-to-client request; the agent's response (any id) goes to `reply`.
    Request {
        message: Value,
        reply: oneshot::Sender<Value>,
    },
    /// The backend answers this request with an event stream (the agent may want one too).
    StreamOpened,
}

/// A message a backend sent on a standalone stream, for the holder of the backend session it came on.
#[derive(Debug)]
pub struct SessionMessage {
    pub holder: SessionHolder,
    pub backend: Arc<str>,
    pub message: RelayMessage,
}

impl Relay {
    /// A relay for an agent that declared `capabilities`, delivering to `sink` (`None`: the agent cannot take
    /// messages during this request, e.g. it accepts only JSON answers).
    pub fn new(capabilities: Value, sink: Option<mpsc::UnboundedSender<RelayMessage>>) -> Self {
        Self { capabilities, sink, cancel: None, refusal: None, standalone: false }
    }

    /// This relay for work that outlives the agent's request (a task): the same capabilities and refusal, nowhere
    /// to deliver messages, and not cancelled by the request.
    pub fn detached(&self) -> Relay {
        Relay {
            capabilities: self.capabilities.clone(),
            sink: None,
            cancel: None,
            refusal: self.refusal,
            standalone: self.standalone,
        }
    }

    /// Lets the agent cancel the request: notifying `cancel` stops waiting and tells the backend.
    pub fn cancellable(mut self, cancel: Arc<Notify>) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Has the backend session's standalone stream opened for this request, whatever the agent declared.
    pub fn with_standalone_stream(mut self) -> Self {
        self.standalone = true;
        self
    }

    /// Whether the request asked for the backend session's standalone stream ([`Relay::with_standalone_stream`]).
    pub(crate) fn wants_standalone_stream(&self) -> bool {
        self.standalone
    }

    /// Refuses every server-to-client request, telling the backend `why` (an agent of the sessionless era cannot
    /// be sent requests at all).
    pub fn refusing_requests(mut self, why: &'static str) -> Self {
        self.refusal = Some(why);
        self
    }

    /// The message of the `-32601` a backend gets for a request `method` that is not relayed to `relay`'s agent.
    pub(crate) fn refusal(relay: Option<&Relay>, method: &str) -> String {
        match relay.and_then(|relay| relay.refusal) {
            Some(why) => format!("{method} cannot be sent to this agent: {why}"),
            None => format!("method not found: {method}"),
        }
    }

    /// Whether the agent cannot be sent requests at all (it is of the sessionless era).
    pub(crate) fn refuses_requests(&self) -> bool {
        self.refusal.is_some()
    }

    /// The client capabilities the agent declared (`null`: none): what a 2026-07-28 backend is told in the
    /// request's `_meta`.
    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }

    /// The capabilities a backend session's handshake may declare for this agent: its own for a session-era
    /// agent, none for a sessionless one (its session is shared by every request of the principal, and requests
    /// it cannot be sent are refused anyway).
    pub fn session_capabilities(&self) -> &Value {
        if self.refuses_requests() { &Value::Null } else { &self.capabilities }
    }

    /// Notified when the agent cancels the request.
    pub(crate) fn cancel(&self) -> Option<&Arc<Notify>> {
        self.cancel.as_ref()
    }

    pub(crate) fn stream_opened(&self) {
        if let Some(sink) = &self.sink {
            let _ = sink.send(RelayMessage::StreamOpened);
        }
    }

    pub(crate) fn forward(&self, message: Value) {
        if let Some(sink) = &self.sink {
            // The caller may have stopped listening (its agent went away); the call itself goes on.
            let _ = sink.send(RelayMessage::Notification(message));
        }
    }

    /// Hands a server-to-client request to the agent when it declared the capability the method needs;
    /// `None` when it cannot be relayed.
    pub(crate) fn ask(&self, method: &str, message: Value) -> Option<oneshot::Receiver<Value>> {
        if self.refusal.is_some() {
            return None;
        }
        let capability = match method {
            method::SAMPLING_CREATE_MESSAGE => "sampling",
            method::ELICITATION_CREATE => "elicitation",
            method::ROOTS_LIST => "roots",
            _ => return None,
        };
        self.capabilities.get(capability)?;
        let (reply, answer) = oneshot::channel();
        self.sink.as_ref()?.send(RelayMessage::Request { message, reply }).ok()?;
        Some(answer)
    }
}
