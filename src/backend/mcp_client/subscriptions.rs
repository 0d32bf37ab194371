//! `subscriptions/listen` streams to 2026-07-28 HTTP backends (`basic/patterns/subscriptions.mdx`): what replaces
//! a 2025-era session's `GET` stream and `resources/subscribe`.
//!
//! Rules:
//! - Each modern backend gets one stream for its list changes (the tools and prompts lists whose `listChanged`
//!   its capabilities announce), opened with the first session made from an era verdict when somebody (the
//!   catalog) listens for list changes. It is reopened when it ends, after a pause, until the verdict it was
//!   opened for is replaced or [`MAX_FAILURES`] openings in a row failed.
//! - A slot whose agent session subscribed to resources holds one stream with `resourceSubscriptions` (and the
//!   resources `listChanged` when announced); it is replaced whenever the set changes, closed when the set is
//!   empty or the slot goes, and what it carries reaches the agent session as a `GET` stream's messages do.
//! - What these streams carry goes through the same [`Listener`] as every exchange, so list changes reach the
//!   catalog and resource news the agent; the acknowledgement stays here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::client::Subscribers;
use super::exchange::{Exchange, Listener, Wire};
use super::listener::{OPEN_WAIT, standing_relay};
use super::modern::{listen_interests, mirrored_headers, request_params};
use super::table::Slot;
use super::{BackendEndpoint, BackendSession, McpBackendClient, Relay, SlotKey};
use crate::mcp::{jsonrpc, method};

/// How long one listen stream is kept before it is reopened.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);
const REOPEN_PAUSE: Duration = Duration::from_secs(1);
/// Failed openings in a row after which a stream is given up.
const MAX_FAILURES: usize = 5;

/// The list-change stream of each modern backend, with the era epoch it was opened for.
#[derive(Default)]
pub(super) struct Watches(Mutex<HashMap<Arc<str>, (u64, AbortHandle)>>);

/// One listen stream: where, at which version, asking for what, and whom to tell.
struct Stream {
    http: crate::backend::http_client::HttpClient,
    home: BackendEndpoint,
    version: &'static str,
    notifications: Value,
    limit: usize,
    subscribers: Arc<Subscribers>,
    backend: Arc<str>,
    /// The agent session's relay (resource streams); `None` for list changes, which only the catalog hears.
    relay: Option<Relay>,
}

impl Watches {
    /// Closes `backend`'s list-change stream, if one is open.
    pub(super) fn stop(&self, backend: &str) {
        let removed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(backend);
        if let Some((_, handle)) = removed {
            handle.abort();
        }
    }
}

impl McpBackendClient {
    /// Keeps the list-change stream of the modern backend `session` belongs to open.
    pub(super) fn watch_lists(&self, key: &SlotKey, session: &BackendSession) {
        let (Some(slot), Some(home)) = (session.modern(), session.modern_home()) else { return };
        let notifications = listen_interests(session.capabilities(), &["tools", "prompts"], &[]);
        if notifications.is_empty() || !self.subscribers.has_list_changed() {
            return;
        }
        let mut watches = self.watches.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let running = watches.get(&key.backend);
        if running.is_some_and(|(epoch, handle)| *epoch == slot.epoch && !handle.is_finished()) {
            return;
        }
        let stream = self.stream(home, session.version, Value::Object(notifications), &key.backend, None);
        let (eras, epoch, backend) = (Arc::clone(&self.eras), slot.epoch, Arc::clone(&key.backend));
        let current = move || eras.is_current(&backend, epoch);
        let handle = tokio::spawn(async move { stream.run(None, &current).await }).abort_handle();
        if let Some((_, old)) = watches.insert(Arc::clone(&key.backend), (epoch, handle)) {
            old.abort();
        }
    }

    /// Replaces the slot's resource stream by one for `uris` (none: closes it), waiting up to [`OPEN_WAIT`] for
    /// the new one to open, so that an update right after the agent's `resources/subscribe` is not lost.
    pub(super) async fn resubscribe(&self, slot: &Slot, key: &SlotKey, session: &BackendSession, uris: Vec<String>) {
        let Some(home) = session.modern_home() else { return };
        if uris.is_empty() {
            slot.stop_listener();
            return;
        }
        let notifications = listen_interests(session.capabilities(), &["resources"], &uris);
        let relay = standing_relay(Arc::clone(&self.subscribers), key.clone(), Value::Null);
        let stream = self.stream(home, session.version, Value::Object(notifications), &key.backend, Some(relay));
        let (opened, ready) = oneshot::channel();
        slot.replace_listener(session.generation, || {
            tokio::spawn(async move { stream.run(Some(opened), &|| true).await }).abort_handle()
        });
        let _ = tokio::time::timeout(OPEN_WAIT, ready).await;
    }

    fn stream(
        &self,
        home: &BackendEndpoint,
        version: &'static str,
        notifications: Value,
        backend: &Arc<str>,
        relay: Option<Relay>,
    ) -> Stream {
        Stream {
            http: self.http.clone(),
            home: home.clone(),
            version,
            notifications,
            limit: self.config.max_exchange_bytes,
            subscribers: Arc::clone(&self.subscribers),
            backend: Arc::clone(backend),
            relay,
        }
    }
}

impl Stream {
    /// Opens the stream and reads it, again and again, while `current()`; `opened` learns when the first
    /// opening has an answer.
    async fn run(&self, mut opened: Option<oneshot::Sender<()>>, current: &(dyn Fn() -> bool + Sync)) {
        let (subscribers, backend) = (Arc::clone(&self.subscribers), Arc::clone(&self.backend));
        let list_changed = move |method: &str| subscribers.announce(&backend, method);
        let mut failures = 0;
        let mut attempt: u64 = 0;
        while failures < MAX_FAILURES && current() {
            attempt += 1;
            let id = json!(format!("switchyard-listen-{attempt}"));
            let params = json!({ "notifications": self.notifications });
            let message = jsonrpc::request(
                &id,
                method::SUBSCRIPTIONS_LISTEN,
                Some(request_params(Some(params), self.version, &Value::Null, None)),
            );
            let Ok(headers) = mirrored_headers(&message) else { return };
            let endpoint = self.home.clone().with_deadline(tokio::time::Instant::now() + CONNECTION_LIFETIME);
            let listener = Listener { relay: self.relay.as_ref(), progress: None, list_changed: Some(&list_changed) };
            let wire = Wire::Modern { version: self.version, headers: &headers };
            let exchange = Exchange {
                http: &self.http,
                endpoint: &endpoint,
                wire,
                limit: self.limit,
                listener,
                strays: None,
                span: None,
            };
            let opening = exchange.open_listen(&message).await;
            if let Some(opened) = opened.take() {
                let _ = opened.send(());
            }
            match opening {
                Ok(response) => {
                    failures = 0;
                    exchange.listen(response).await;
                }
                Err(error) => {
                    failures += 1;
                    tracing::debug!(backend = %self.backend, ?error, "could not open a subscriptions/listen stream");
                }
            }
            tokio::time::sleep(REOPEN_PAUSE).await;
        }
    }
}
