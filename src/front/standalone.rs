//! The agent's standalone stream: `GET /mcp` (MCP transports §"Listening for Messages from the Server"; design
//! §3). It carries messages not tied to a call — `notifications/tools/list_changed` when the tools the stream's
//! view shows have changed, and what backends send on their own standalone streams of this agent's sessions
//! (server-to-client requests, `notifications/resources/updated`, log messages), `notifications/tasks/status`
//! for the tasks changed on the session's behalf (MCP 2025-11-25 utilities §"Tasks": optional, the agent still
//! polls) — and keep-alive comments.
//!
//! Rules: an agent may hold several standalone streams, at most `[server] max_streams_per_session` per session on
//! this replica (one more is refused 429, and the open ones are kept); each message goes to exactly one of them
//! (the oldest one still open for that session), never to all (transports §"Multiple Connections"). Streams are
//! connection state of this replica only; the session itself stays sealed and stateless. A backend's message, or a
//! task status written here, for a session whose stream another replica holds is passed to that replica
//! ([`super::fleet`]), which delivers it there.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::response::Response;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;

use super::Front;
use super::error::FrontError;
use super::stream::{EventWriter, KEEP_ALIVE, event_stream};
use crate::mcp::{SessionHolder, jsonrpc, method};
use crate::router::{SessionMessages, TaskChange, TaskHearing, ToolsChanged, View};

type Inbox = mpsc::UnboundedSender<Value>;

/// The standalone streams open on this replica, by agent session, oldest first.
#[derive(Default)]
pub struct Streams {
    open: Mutex<HashMap<String, Vec<(u64, Inbox)>>>,
    next: AtomicU64,
}

/// Keeps a stream registered while it is open.
struct Registration {
    streams: Arc<Streams>,
    session: String,
    id: u64,
}

impl Streams {
    /// Registers one more stream of `session`, unless it already holds `max`.
    fn register(
        self: &Arc<Self>,
        session: String,
        max: usize,
    ) -> Result<(Registration, mpsc::UnboundedReceiver<Value>), FrontError> {
        let mut open = self.open.lock();
        let streams = open.entry(session.clone()).or_default();
        if streams.len() >= max {
            return Err(FrontError::TooManyStreams { max });
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (inbox, messages) = mpsc::unbounded_channel();
        streams.push((id, inbox));
        Ok((Registration { streams: Arc::clone(self), session, id }, messages))
    }

    /// Whether the session has a standalone stream open on this replica.
    pub fn has(&self, session: &str) -> bool {
        self.count(session) > 0
    }

    /// Sends a message on the session's oldest standalone stream; false when it has none.
    pub fn deliver(&self, session: &str, message: Value) -> bool {
        let open = self.open.lock();
        let oldest = open.get(session).and_then(|streams| streams.first());
        oldest.is_some_and(|(_, inbox)| inbox.send(message).is_ok())
    }

    /// How many standalone streams are open for a session.
    pub fn count(&self, session: &str) -> usize {
        self.open.lock().get(session).map_or(0, Vec::len)
    }
}

impl Registration {
    fn is_oldest(&self) -> bool {
        self.streams
            .open
            .lock()
            .get(&self.session)
            .and_then(|streams| streams.first())
            .is_some_and(|(id, _)| *id == self.id)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock();
        if let Some(ids) = open.get_mut(&self.session) {
            ids.retain(|(id, _)| *id != self.id);
            if ids.is_empty() {
                open.remove(&self.session);
            }
        }
    }
}

/// Opens a standalone stream for `session`, showing the view of `backend` (`None`: every backend), unless the
/// session already holds `max`; the session hears its task statuses while the stream is open (`hearing`).
pub(super) fn open(
    streams: &Arc<Streams>,
    session: String,
    max: usize,
    backend: Option<String>,
    changes: broadcast::Receiver<ToolsChanged>,
    hearing: TaskHearing,
) -> Result<Response, FrontError> {
    let (registration, inbox) = streams.register(session, max)?;
    Ok(event_stream(move |out| feed(out, registration, inbox, backend, changes, hearing)))
}

async fn feed(
    mut out: EventWriter,
    registration: Registration,
    mut inbox: mpsc::UnboundedReceiver<Value>,
    backend: Option<String>,
    mut changes: broadcast::Receiver<ToolsChanged>,
    _hearing: TaskHearing,
) {
    if out.priming().is_err() {
        return;
    }
    let list_changed = jsonrpc::notification("notifications/tools/list_changed", None);
    loop {
        let sent = tokio::select! {
            change = changes.recv() => match change {
                Ok(changed) if !changed.shows_to(backend.as_deref().map_or(View::All, View::Backend), &registration.session) => Ok(()),
                // A lagging receiver missed changes: telling the agent once more is harmless.
                Ok(_) | Err(RecvError::Lagged(_)) if registration.is_oldest() => out.message(&list_changed),
                Ok(_) | Err(RecvError::Lagged(_)) => Ok(()),
                Err(RecvError::Closed) => return,
            },
            Some(message) = inbox.recv() => out.message(&message),
            () = tokio::time::sleep(KEEP_ALIVE) => out.comment("keep-alive"),
            () = out.closed() => return,
        };
        if sent.is_err() {
            return;
        }
    }
}

impl Front {
    /// Delivers what backends send on their standalone streams to the agents they belong to, until the router
    /// stops sending.
    pub async fn deliver_session_messages(self: Arc<Self>, mut messages: SessionMessages) {
        while let Some(message) = messages.recv().await {
            self.deliver_session_message(message);
        }
    }

    /// Tells each agent session of the status changes of its tasks this replica wrote for a request of that
    /// session, on its standalone stream here or on the replica holding one, and the other replicas of every
    /// change this one wrote (for their listen streams), until the router stops.
    pub async fn deliver_task_changes(self: Arc<Self>, mut changes: broadcast::Receiver<TaskChange>) {
        loop {
            match changes.recv().await {
                Ok(change) if change.here => self.tell_task_change(change),
                // Another replica's change is for the listen streams here; a missed change is only a missed
                // hint: the agent polls `tasks/get`.
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    }

    fn tell_task_change(&self, change: TaskChange) {
        if let Some(fleet) = &self.fleet {
            fleet.task_changed(&change.principal, &change.id);
        }
        let SessionHolder::Agent(session) = change.session else { return };
        let note = jsonrpc::notification(method::TASKS_STATUS, Some(change.task));
        if self.streams.has(&session) {
            self.streams.deliver(&session, note);
        } else if let Some(fleet) = &self.fleet {
            fleet.deliver_elsewhere(session.to_string(), note, &self.pending);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_holds_at_most_max_streams_and_regains_room_when_one_closes() {
        let streams = Arc::new(Streams::default());
        let first = streams.register("s".into(), 2).expect("room");
        let _second = streams.register("s".into(), 2).expect("room");
        let refused = streams.register("s".into(), 2).map(|_| ()).expect_err("full");
        assert!(matches!(refused, FrontError::TooManyStreams { max: 2 }), "{refused:?}");
        assert_eq!(streams.count("s"), 2, "the open ones are kept");
        let _other = streams.register("t".into(), 2).expect("another session's streams are its own");
        drop(first);
        assert!(streams.register("s".into(), 2).is_ok(), "room again once one closed");
    }
}
