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
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::background::BackgroundStream;
use super::era::Eras;
use super::modern::mirrored_headers;
use super::params::{listen_interests, request_params};
use super::shared::Shared;
use super::standalone::{OPEN_WAIT, standing_relay};
use super::transport::BackendSession;
use crate::backend::mcp_client::endpoint::{BackendEndpoint, SlotKey};
use crate::backend::mcp_client::wire::exchange::{Exchange, Wire};
use crate::backend::mcp_client::wire::notifications::NotificationRoute;
use crate::mcp::{Relay, jsonrpc, method};

/// How long one listen stream is kept before it is reopened.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);
const REOPEN_PAUSE: Duration = Duration::from_secs(1);
/// Failed openings in a row after which a stream is given up.
const MAX_FAILURES: usize = 5;

/// The list-change stream of each modern backend, with the era epoch it was opened for.
#[derive(Default)]
pub(crate) struct Watches(Mutex<HashMap<Arc<str>, (u64, AbortHandle)>>);

/// One listen stream: where, at which version and on whose behalf, asking for what, and whom to tell.
struct Stream {
    shared: Arc<Shared>,
    home: BackendEndpoint,
    version: &'static str,
    principal: Option<Arc<str>>,
    notifications: Value,
    backend: Arc<str>,
    /// The agent session's relay (resource streams); `None` for list changes, which only the catalog hears.
    relay: Option<Relay>,
}

impl Watches {
    /// Closes `backend`'s list-change stream, if one is open.
    pub(crate) fn stop(&self, backend: &str) {
        let removed = self.0.lock().remove(backend);
        if let Some((_, handle)) = removed {
            handle.abort();
        }
    }

    /// Keeps the list-change stream of the modern backend `session` belongs to open while its era verdict is
    /// current.
    pub(crate) fn watch(&self, shared: &Arc<Shared>, eras: &Arc<Eras>, key: &SlotKey, session: &BackendSession) {
        let (Some(slot), Some(home)) = (session.modern(), session.modern_home()) else { return };
        let notifications = listen_interests(session.capabilities(), &["tools", "prompts"], &[]);
        if notifications.is_empty() || !shared.subscribers.has_list_changed() {
            return;
        }
        let mut watches = self.0.lock();
        let running = watches.get(&key.backend);
        if running.is_some_and(|(epoch, handle)| *epoch == slot.epoch && !handle.is_finished()) {
            return;
        }
        let stream = Stream::new(shared, home, session, Value::Object(notifications), &key.backend, None);
        let (eras, epoch, backend) = (Arc::clone(eras), slot.epoch, Arc::clone(&key.backend));
        let current = move || eras.is_current(&backend, epoch);
        let handle = tokio::spawn(async move { stream.run(None, &current).await }).abort_handle();
        if let Some((_, old)) = watches.insert(Arc::clone(&key.backend), (epoch, handle)) {
            old.abort();
        }
    }
}

/// Replaces the slot's resource stream (in `background`) by one for `uris` (none: closes it), waiting up to
/// [`OPEN_WAIT`] for the new one to open, so that an update right after the agent's `resources/subscribe` is not
/// lost.
pub(crate) async fn resubscribe(
    shared: &Arc<Shared>,
    background: &BackgroundStream,
    key: &SlotKey,
    session: &BackendSession,
    uris: Vec<String>,
) {
    let Some(home) = session.modern_home() else { return };
    if uris.is_empty() {
        background.stop();
        return;
    }
    let notifications = listen_interests(session.capabilities(), &["resources"], &uris);
    let relay = standing_relay(Arc::clone(shared), key.clone(), Value::Null);
    let stream = Stream::new(shared, home, session, Value::Object(notifications), &key.backend, Some(relay));
    let (opened, ready) = oneshot::channel();
    background.replace(session.generation, || {
        tokio::spawn(async move { stream.run(Some(opened), &|| true).await }).abort_handle()
    });
    let _ = tokio::time::timeout(OPEN_WAIT, ready).await;
}

impl Stream {
    fn new(
        shared: &Arc<Shared>,
        home: &BackendEndpoint,
        session: &BackendSession,
        notifications: Value,
        backend: &Arc<str>,
        relay: Option<Relay>,
    ) -> Self {
        Stream {
            shared: Arc::clone(shared),
            home: home.clone(),
            version: session.version,
            principal: session.principal.clone(),
            notifications,
            backend: Arc::clone(backend),
            relay,
        }
    }
}

impl Stream {
    /// Opens the stream and reads it, again and again, while `current()`; `opened` learns when the first
    /// opening has an answer.
    async fn run(&self, mut opened: Option<oneshot::Sender<()>>, current: &(dyn Fn() -> bool + Sync)) {
        let (shared, backend) = (Arc::clone(&self.shared), Arc::clone(&self.backend));
        let list_changed = move |method: &str| shared.subscribers.announce(&backend, method);
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
            let notifications =
                NotificationRoute { relay: self.relay.as_ref(), progress: None, list_changed: Some(&list_changed) };
            let exchange = Exchange {
                http: &self.shared.http,
                endpoint: &self.home,
                wire: Wire::Modern { version: self.version, headers: &headers },
                deadline: Instant::now() + CONNECTION_LIFETIME,
                principal: self.principal.as_deref(),
                subject_token: None,
                limit: self.shared.limit,
                notifications,
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
                    tracing::debug!(backend = %self.backend, %error, "could not open a subscriptions/listen stream");
                }
            }
            tokio::time::sleep(REOPEN_PAUSE).await;
        }
    }
}
