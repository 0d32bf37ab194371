//! Requests an agent may still cancel (MCP utilities/cancellation): while a request runs, a
//! `notifications/cancelled` naming its id in the same session reaches it; the backend client then tells the
//! backend with the backend-side id. A disconnect is not a cancel. State of this replica only.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::Notify;

type Key = (String, String);

#[derive(Default)]
pub struct Cancels(Mutex<HashMap<Key, Arc<Notify>>>);

/// Keeps a request cancellable while it lives.
pub struct Cancellable {
    cancels: Arc<Cancels>,
    key: Key,
    pub signal: Arc<Notify>,
}

impl Cancels {
    /// Registers the request `id` (any JSON-RPC id) of `session`.
    pub fn register(self: &Arc<Self>, session: &str, id: &Value) -> Cancellable {
        let key = (session.to_owned(), id.to_string());
        let signal = Arc::new(Notify::new());
        self.0.lock().insert(key.clone(), Arc::clone(&signal));
        Cancellable { cancels: Arc::clone(self), key, signal }
    }

    /// Cancels the running request `id` of `session`; false when there is none.
    pub fn cancel(&self, session: &str, id: &Value) -> bool {
        let signal = self.0.lock().get(&(session.to_owned(), id.to_string())).cloned();
        // notify_one keeps a permit, so a cancel that races the request's start is not lost.
        signal.map(|signal| signal.notify_one()).is_some()
    }
}

impl Drop for Cancellable {
    fn drop(&mut self) {
        let mut running = self.cancels.0.lock();
        if running.get(&self.key).is_some_and(|signal| Arc::ptr_eq(signal, &self.signal)) {
            running.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_same_sessions_running_request_is_cancelled() {
        let cancels = Arc::new(Cancels::default());
        let running = cancels.register("s1", &json!(4));
        assert!(!cancels.cancel("s2", &json!(4)), "another session's id");
        assert!(!cancels.cancel("s1", &json!("4")), "ids keep their JSON type");
        assert!(cancels.cancel("s1", &json!(4)));
        drop(running);
        assert!(!cancels.cancel("s1", &json!(4)), "finished requests cannot be cancelled");
    }
}
