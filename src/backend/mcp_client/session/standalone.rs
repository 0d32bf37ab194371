//! A backend session's standalone stream (MCP transports §"Listening for Messages from the Server"):
//! opened with `GET` when the agent declared capabilities a backend may call on outside a request (sampling,
//! elicitation, roots) or subscribed to a resource, so that server-to-client requests and notifications not tied
//! to a call (`notifications/resources/updated`, `…/list_changed`) reach the agent.
//!
//! Rules: one standalone stream per backend session, held in its slot's [`super::background::BackgroundStream`]
//! and aborted with it; a stream that ends is reopened with
//! `Last-Event-ID` after a pause; a backend that answers `GET` with 405 offers no stream and is not asked again;
//! a 404 means the session ended. Each connection is bounded in time ([`CONNECTION_LIFETIME`]) and reopened.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::shared::Shared;
use super::transport::BackendSession;
use crate::backend::mcp_client::endpoint::SlotKey;
use crate::backend::mcp_client::error::McpError;
use crate::backend::mcp_client::wire::exchange::Exchange;
use crate::backend::mcp_client::wire::failure::ExchangeError;
use crate::backend::mcp_client::wire::notifications::NotificationRoute;
use crate::mcp::{Relay, SessionMessage};

/// How long one `GET` connection is kept before it is reopened (also bounds waiting for an agent's answer).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);
const REOPEN_PAUSE: Duration = Duration::from_secs(1);
/// Failed attempts in a row after which the stream is given up.
const MAX_FAILURES: usize = 5;

/// Whether an agent with these capabilities needs the backend's standalone stream.
pub(crate) fn wanted(capabilities: &Value) -> bool {
    ["sampling", "elicitation", "roots"].iter().any(|capability| capabilities.get(capability).is_some())
}

/// How long the first request of a session waits for its new standalone stream to open.
pub(crate) const OPEN_WAIT: Duration = Duration::from_secs(2);

/// Starts reading `session`'s standalone stream; the receiver completes once the first attempt to open it has an
/// answer (open or refused).
pub(crate) fn spawn(
    shared: Arc<Shared>,
    session: BackendSession,
    key: SlotKey,
    capabilities: Value,
) -> (AbortHandle, oneshot::Receiver<()>) {
    let (opened, ready) = oneshot::channel();
    let handle = tokio::spawn(async move {
        let backend = key.backend.clone();
        let announcer = Arc::clone(&shared);
        let list_changed = move |method: &str| announcer.subscribers.announce(&backend, method);
        let relay = standing_relay(Arc::clone(&shared), key, capabilities);
        let hooks = Hooks { relay: &relay, list_changed: &list_changed, opened: Some(opened) };
        read(&shared, &session, hooks).await;
    })
    .abort_handle();
    (handle, ready)
}

/// A relay whose messages reach the agent session of `key` as [`SessionMessage`]s (through whoever subscribes
/// when each one arrives), for as long as the relay lives: what a backend sends outside any call, on any transport.
pub(crate) fn standing_relay(shared: Arc<Shared>, key: SlotKey, capabilities: Value) -> Relay {
    let (relayed, mut messages) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(message) = messages.recv().await {
            let tagged = SessionMessage { holder: key.holder.clone(), backend: key.backend.clone(), message };
            shared.subscribers.deliver(tagged);
        }
    });
    Relay::new(capabilities, Some(relayed))
}

/// What the stream does with what it hears, and whom it tells that it is open.
struct Hooks<'a> {
    relay: &'a Relay,
    list_changed: &'a (dyn Fn(&str) + Sync),
    opened: Option<oneshot::Sender<()>>,
}

async fn read(shared: &Shared, session: &BackendSession, mut hooks: Hooks<'_>) {
    let Some(home) = session.http_home() else { return };
    let mut last_event_id: Option<String> = None;
    let mut failures = 0;
    while failures < MAX_FAILURES {
        let notifications =
            NotificationRoute { relay: Some(hooks.relay), progress: None, list_changed: Some(hooks.list_changed) };
        let exchange = Exchange {
            http: &shared.http,
            endpoint: home,
            wire: session.wire(),
            deadline: Instant::now() + CONNECTION_LIFETIME,
            principal: session.principal.as_deref(),
            subject_token: None,
            limit: shared.limit,
            notifications,
            strays: Some(&shared.strays),
            span: None,
        };
        let opening = exchange.open_stream(last_event_id.as_deref()).await;
        if let Some(opened) = hooks.opened.take() {
            let _ = opened.send(());
        }
        match opening {
            Ok(response) => {
                failures = 0;
                last_event_id = exchange.listen(response).await.or(last_event_id);
            }
            Err(ExchangeError::SessionGone) => return,
            Err(ExchangeError::Failed(McpError::HttpStatus { status: 405, .. })) => return,
            Err(error) => {
                failures += 1;
                tracing::debug!(%error, "could not open a backend's standalone stream");
            }
        }
        tokio::time::sleep(REOPEN_PAUSE).await;
    }
}
