//! Server-to-client requests relayed to agents and waiting for their answers.
//!
//! Rules: a relayed request gets an id of the gateway's (`switchyard-<n>`), so ids from different backends (and
//! from the backend client's own numbering) never collide in the agent's view; the agent's response is accepted
//! only from the agent session the request was sent to, and is handed to the waiting backend exchange, which
//! restores the backend's own id (and is counted in `switchyard_relayed_requests_total`). Waiters whose exchange
//! ended are swept. State of this replica only: the
//! agent answers on the connection family it was asked on.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::mcp::RelayMessage;
use crate::telemetry::Metrics;

/// Sweep waiters whose exchange ended once the map grows past this.
const SWEEP_AT: usize = 1024;

#[derive(Default)]
pub struct PendingRequests {
    waiting: Mutex<HashMap<(String, String), oneshot::Sender<Value>>>,
    next: AtomicU64,
    /// Where relayed requests are counted.
    metrics: Arc<Metrics>,
}

impl PendingRequests {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics, ..Self::default() }
    }

    /// Turns a relayed message into what the agent sees: a request gets a gateway id and is remembered. A
    /// message that carries nothing for the agent gives `None`.
    pub fn prepare(&self, session: &str, message: RelayMessage) -> Option<Value> {
        Some(match message {
            RelayMessage::StreamOpened => return None,
            RelayMessage::Notification(note) => note,
            RelayMessage::Request { mut message, reply } => {
                self.metrics.relayed_request(message.get("method").and_then(Value::as_str).unwrap_or_default());
                let id = format!("switchyard-{}", self.next.fetch_add(1, Ordering::Relaxed));
                message["id"] = Value::String(id.clone());
                let mut waiting = self.waiting.lock();
                if waiting.len() >= SWEEP_AT {
                    waiting.retain(|_, waiter| !waiter.is_closed());
                }
                waiting.insert((session.to_owned(), id), reply);
                message
            }
        })
    }

    /// Forgets a relayed request that reached no agent, so the exchange waiting for its answer ends at once.
    pub fn forget(&self, session: &str, request: &Value) {
        if let Some(id) = request.get("id").and_then(Value::as_str) {
            self.waiting.lock().remove(&(session.to_owned(), id.to_owned()));
        }
    }

    /// Hands the agent's response to the exchange waiting for it; false when nobody waits for that id in that
    /// session.
    pub fn answer(&self, session: &str, response: Value) -> bool {
        let Some(id) = response.get("id").and_then(Value::as_str) else { return false };
        let waiter = self.waiting.lock().remove(&(session.to_owned(), id.to_owned()));
        waiter.is_some_and(|waiter| waiter.send(response).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_reach_the_waiter_of_the_same_session_only() {
        let pending = PendingRequests::default();
        let (reply, mut answer) = oneshot::channel();
        let request = json!({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create"});
        let sent = pending.prepare("s1", RelayMessage::Request { message: request, reply }).unwrap();
        let id = sent["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("switchyard-"));
        let response = json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept"}});
        assert!(!pending.answer("s2", response.clone()), "another session cannot answer");
        assert!(pending.answer("s1", response.clone()));
        assert_eq!(answer.try_recv().unwrap(), response);
        assert!(!pending.answer("s1", response), "answered once");
    }
}
