//! The status notifications of passthrough tasks for 2026-07-28 agents (the tasks extension: `notifications/tasks`
//! on `subscriptions/listen`; docs/tasks.md, *Passthrough*): an agent's listen stream that names sealed task ids
//! in `taskIds` gets a listen stream of its own on each backend that runs one of them, asking for the backend's
//! ids, and hears the backend's `notifications/tasks` under the sealed ids.
//!
//! Rules:
//! - Only ids that open for the stream's principal are watched (another principal's or a forged id is
//!   acknowledged by the front like any, and never reaches a backend).
//! - The backend's stream is the caller's own backend session's (the principal's, as for `tasks/get`), declares
//!   the tasks extension, and asks for nothing but `taskIds`. It is a request held open: it ends after
//!   [`LIFETIME`] or when the backend closes it, and is opened again after a pause while the agent's stream is
//!   open. A status sent in between is missed; notifications are hints (`tasks/get` is the truth). A backend that
//!   answers the request with an error (it has no listen streams) is not asked again for this agent stream.
//! - A notification for an id the stream did not ask for is dropped; the backend's id never reaches the agent.
//! - Dropping the [`BackendTaskWatch`] (the agent's stream closed) closes every backend stream.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::super::{CallRouter, Caller};
use super::extension::TASKS_EXTENSION;
use crate::backend::mcp_client::{Destination, McpError};
use crate::mcp::method::{SUBSCRIPTIONS_LISTEN, TASKS_NOTIFICATION};
use crate::mcp::{Relay, RelayMessage};

/// The pause before a backend's listen stream is opened again.
const REOPEN_PAUSE: Duration = Duration::from_secs(1);
/// How long one backend listen stream is held before it is opened again (as the client's own listen streams).
const LIFETIME: Duration = Duration::from_secs(600);

/// The backend streams one agent stream holds; closed when dropped.
#[derive(Debug, Default)]
pub struct BackendTaskWatch(Vec<AbortHandle>);

impl Drop for BackendTaskWatch {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}

/// One backend's watched tasks: the backend's id and the sealed id the agent knows.
type Watched = HashMap<String, String>;

impl CallRouter {
    /// Watches the backends' tasks among `ids` (sealed ids of `caller`'s principal) for a listen stream: their
    /// `notifications/tasks`, under the sealed ids, go to `inbox` while the returned watch is held.
    pub fn watch_backend_tasks(
        self: &Arc<Self>,
        caller: &Caller,
        ids: &[String],
        inbox: &mpsc::UnboundedSender<Value>,
    ) -> BackendTaskWatch {
        let principal = caller.fairness_key();
        let mut by_backend: HashMap<Arc<str>, Watched> = HashMap::new();
        // A gateway task's id, another principal's or a forged one does not open.
        for sealed in ids {
            if let Ok(task) = self.tasks.passthrough.open(sealed, &principal) {
                by_backend.entry(task.backend.as_str().into()).or_default().insert(task.task, sealed.clone());
            }
        }
        let handles = by_backend.into_iter().map(|(backend, watched)| {
            let (router, caller, inbox) = (Arc::clone(self), caller.clone(), inbox.clone());
            tokio::spawn(async move { router.listen_backend(&caller, &backend, &watched, &inbox).await }).abort_handle()
        });
        BackendTaskWatch(handles.collect())
    }

    /// Keeps a listen stream open on `backend` for the `watched` tasks while `inbox` is.
    async fn listen_backend(
        &self,
        caller: &Caller,
        backend: &Arc<str>,
        watched: &Watched,
        inbox: &mpsc::UnboundedSender<Value>,
    ) {
        let params = json!({ "notifications": { "taskIds": watched.keys().collect::<Vec<_>>() } });
        while !inbox.is_closed() {
            // A backend no longer configured has no stream to hold.
            let Some(target) = self.routing.load().targets.get(backend).cloned() else { return };
            let (slot, context) = caller.on_backend(backend, &target);
            let context = context.lasting(LIFETIME);
            let (sink, mut heard) = mpsc::unbounded_channel();
            let relay = Relay::new(json!({ "extensions": { TASKS_EXTENSION: {} } }), Some(sink))
                .refusing_requests("a listen stream is sent notifications only");
            let to = Destination { slot: &slot, target: &target, context: &context };
            let listening = self.client.request_raw(to, SUBSCRIPTIONS_LISTEN, params.clone(), &relay);
            tokio::pin!(listening);
            loop {
                tokio::select! {
                    ended = &mut listening => {
                        match ended {
                            Ok(_) => {}
                            Err(error @ McpError::Rpc { .. }) => {
                                tracing::info!(%backend, %error, "the backend refuses task listen streams");
                                return;
                            }
                            Err(error) => tracing::debug!(%backend, %error, "a backend's task listen stream ended"),
                        }
                        break;
                    }
                    Some(message) = heard.recv() => {
                        if let Some(note) = exposed(message, watched) {
                            let _ = inbox.send(note);
                        }
                    }
                    () = inbox.closed() => return,
                }
            }
            tokio::time::sleep(REOPEN_PAUSE).await;
        }
    }
}

/// A backend's `notifications/tasks` for one of the `watched` tasks, under its sealed id (its own stream's
/// subscription id dropped: the agent's stream tags it with its own).
fn exposed(message: RelayMessage, watched: &Watched) -> Option<Value> {
    let RelayMessage::Notification(mut note) = message else { return None };
    if note.get("method").and_then(Value::as_str) != Some(TASKS_NOTIFICATION) {
        return None;
    }
    let params = note.get_mut("params").and_then(Value::as_object_mut)?;
    let sealed = params.get("taskId").and_then(Value::as_str).and_then(|id| watched.get(id))?;
    params.insert("taskId".into(), json!(sealed));
    params.remove("_meta");
    Some(note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_watched_tasks_notification_is_relayed_under_its_sealed_id() {
        let watched: Watched = [("t-1".to_owned(), "syt1.sealed".to_owned())].into();
        let meta = json!({"io.modelcontextprotocol/subscriptionId": "switchyard"});
        let note = |method: &str, id: &str| {
            let params = json!({"taskId": id, "status": "completed", "_meta": meta});
            RelayMessage::Notification(json!({"jsonrpc": "2.0", "method": method, "params": params}))
        };
        let relayed = exposed(note(TASKS_NOTIFICATION, "t-1"), &watched).expect("relayed");
        assert_eq!(relayed["params"], json!({"taskId": "syt1.sealed", "status": "completed"}));
        assert!(exposed(note(TASKS_NOTIFICATION, "t-2"), &watched).is_none(), "not watched");
        assert!(exposed(note("notifications/message", "t-1"), &watched).is_none(), "not a task status");
        assert!(exposed(RelayMessage::StreamOpened, &watched).is_none());
    }
}
