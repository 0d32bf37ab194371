//! Responses that arrive on the wrong stream: a backend answering a request on its standalone stream (which the
//! spec forbids but servers do) still reaches the exchange waiting for that id.
//!
//! Rules: the client's request ids are numbers unique across all its sessions, so one table serves every
//! session; an exchange forgets its id when it ends, answered or not.

use std::collections::HashMap;

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::oneshot;

/// Responses that arrive on a stream other than their request's — a backend answering on its standalone stream,
/// which the spec forbids but servers do — still reach the exchange waiting for that id (ids are unique per client).
#[derive(Default)]
pub(crate) struct Strays(Mutex<HashMap<u64, oneshot::Sender<Bytes>>>);

/// Waits for a stray response to one id; forgets the id when dropped.
pub(crate) struct Stray<'a> {
    strays: &'a Strays,
    /// The request's id: the client's ids are numbers (the session layer's `Shared::next_id`).
    key: Option<u64>,
    arrival: Option<oneshot::Receiver<Bytes>>,
}

impl Strays {
    pub(super) fn watch(&self, id: &Value) -> Stray<'_> {
        let Some(key) = id.as_u64() else { return Stray { strays: self, key: None, arrival: None } };
        let (sender, arrival) = oneshot::channel();
        self.0.lock().insert(key, sender);
        Stray { strays: self, key: Some(key), arrival: Some(arrival) }
    }

    /// Hands the response `message` (whose id is `id`) to the exchange waiting for it, if any.
    pub(crate) fn deliver(&self, id: &Value, message: Bytes) {
        let Some(id) = id.as_u64() else { return };
        if let Some(waiting) = self.0.lock().remove(&id) {
            let _ = waiting.send(message);
        }
    }
}

impl Stray<'_> {
    /// The stray response, if one arrives; pends forever otherwise.
    pub(super) async fn arrival(&mut self) -> Option<Bytes> {
        match self.arrival.as_mut() {
            Some(arrival) => arrival.await.ok(),
            None => std::future::pending().await,
        }
    }
}

impl Drop for Stray<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.strays.0.lock().remove(&key);
        }
    }
}
