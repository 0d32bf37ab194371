//! How a session over a pair of message channels starts and, once it is known to be a 2026-07-28 one, what its
//! requests carry (MCP 2026-07-28 §8, `basic/transports/stdio.mdx`).
//!
//! Rules:
//! - A probe is `server/discover` at the newest modern version, waiting at most [`PROBE_WAIT`]: a result naming a
//!   modern version, or a modern error, means a modern backend, and no `initialize` is sent; any other error, or
//!   no answer in time, means a 2025-era backend, and `initialize` follows on the same channel. A `-32022` answer
//!   to that `initialize` is modern evidence after all (the probe's late answer locked the server into the
//!   modern era): the probe is repeated once. A channel that ended during the probe fails the start.
//! - Modern requests carry the `_meta` members of [`request_params`]. `notifications/cancelled` still cancels over
//!   stdio. Methods 2026-07-28 removed are answered from [`Asked`]; list changes and resource subscriptions travel
//!   on one `subscriptions/listen` request kept open (and replaced when the subscriptions change), whose messages
//!   go where the session's other messages outside calls go.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Duplex;
use crate::backend::mcp_client::{
    AfterDeliveryCause, Asked, LATEST_MODERN_VERSION, McpError, NotDeliveredCause, Relay, Verdict, initialize_params,
    listen_interests, negotiated_version, request_params, verdict_of_error, verdict_of_result,
};
use crate::mcp::jsonrpc::{self, UNSUPPORTED_PROTOCOL_VERSION};
use crate::mcp::method;

/// How long a probe waits for its answer before the backend counts as a 2025-era one.
pub const PROBE_WAIT: Duration = Duration::from_secs(5);
/// How long one `subscriptions/listen` request is kept open before it is renewed.
const LISTEN_LIFETIME: Duration = Duration::from_secs(600);

/// How a session starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// `initialize` only: a 2025-era backend, or one configured or known to be.
    Legacy,
    /// `server/discover` first; with `fallback`, a 2025-era answer leads to `initialize`, without it the backend
    /// is refused.
    Probe { fallback: bool },
}

/// What the start learnt.
pub(super) struct Opened {
    pub(super) version: &'static str,
    pub(super) capabilities: Value,
    pub(super) modern: bool,
}

impl Duplex {
    /// Starts the session as `opening` says; the agent's client `capabilities` are offered in `initialize`.
    pub(super) async fn open(
        self: &Arc<Self>,
        opening: Opening,
        capabilities: &Value,
        deadline: Instant,
    ) -> Result<Opened, McpError> {
        let Opening::Probe { fallback } = opening else { return self.initialize(capabilities, deadline).await };
        let mut version = LATEST_MODERN_VERSION;
        let mut retried = false;
        loop {
            match self.probe(version, retried, deadline).await? {
                Verdict::Modern(server) => {
                    let capabilities = Value::clone(&server.capabilities);
                    return Ok(Opened { version: server.version, capabilities, modern: true });
                }
                Verdict::Retry(next) => version = next,
                Verdict::Refused(why) => return Err(handshake(why)),
                Verdict::Legacy if !fallback => {
                    return Err(handshake(
                        "the backend is configured with era = \"modern\", but it answered server/discover as a \
                         2025-era server"
                            .into(),
                    ));
                }
                Verdict::Legacy => match self.initialize(capabilities, deadline).await {
                    Err(McpError::Rpc { code: UNSUPPORTED_PROTOCOL_VERSION, .. }) if !retried => {}
                    opened => return opened,
                },
            }
            retried = true;
        }
    }

    async fn probe(
        self: &Arc<Self>,
        version: &'static str,
        retried: bool,
        deadline: Instant,
    ) -> Result<Verdict, McpError> {
        let wait = deadline.min(Instant::now() + PROBE_WAIT);
        let params = request_params(None, version, &Value::Null, None);
        match self.request(method::SERVER_DISCOVER, params, &Relay::default(), wait).await {
            Ok(result) => Ok(verdict_of_result(&result.to_value(), version)),
            Err(McpError::Rpc { code, message, data }) => {
                Ok(verdict_of_error(code, &message, data.as_ref(), None, version, retried))
            }
            // A 2025-era server may ignore a request before `initialize`.
            Err(McpError::AfterDelivery { cause: AfterDeliveryCause::Deadline, .. }) => Ok(Verdict::Legacy),
            Err(error) => Err(error),
        }
    }

    async fn initialize(self: &Arc<Self>, capabilities: &Value, deadline: Instant) -> Result<Opened, McpError> {
        let params = initialize_params(capabilities);
        // The handshake reads inside its result: a tree, once per session.
        let result = self.request(method::INITIALIZE, params, &Relay::default(), deadline).await?.to_value();
        let version = negotiated_version(&result)?;
        let capabilities = result.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        self.sink.send(&jsonrpc::notification(method::INITIALIZED, None), deadline).await?;
        Ok(Opened { version, capabilities, modern: false })
    }
}

fn handshake(reason: String) -> McpError {
    McpError::NotDelivered { cause: NotDeliveredCause::Handshake, reason: reason.into() }
}

/// The 2026-07-28 side of a session: what the agent asked, and the open `subscriptions/listen` request.
#[derive(Default)]
pub(super) struct ModernDuplex {
    pub(super) asked: Asked,
    /// Cancels the open listen request.
    listening: parking_lot::Mutex<Option<Arc<Notify>>>,
}

impl ModernDuplex {
    /// Replaces the open listen request by one for the list changes `capabilities` announce and the resources
    /// `uris` (nothing to listen for: none).
    pub(super) fn listen(&self, duplex: &Arc<Duplex>, version: &'static str, capabilities: &Value, uris: &[String]) {
        let notifications = listen_interests(capabilities, &["tools", "prompts", "resources"], uris);
        let cancel = (!notifications.is_empty()).then(|| Arc::new(Notify::new()));
        let previous = std::mem::replace(&mut *self.listening.lock(), cancel.clone());
        if let Some(previous) = previous {
            previous.notify_one();
        }
        let Some(cancel) = cancel else { return };
        let relay = duplex.peer.standing.relay.clone().unwrap_or_default().cancellable(cancel);
        let params = request_params(Some(json!({"notifications": notifications})), version, &Value::Null, None);
        let duplex = Arc::clone(duplex);
        tokio::spawn(async move {
            // Renewed when its own deadline passes; anything else (cancelled, the session ended, the server's
            // graceful end or refusal) ends it.
            loop {
                let deadline = Instant::now() + LISTEN_LIFETIME;
                match duplex.request(method::SUBSCRIPTIONS_LISTEN, params.clone(), &relay, deadline).await {
                    Err(McpError::AfterDelivery { cause: AfterDeliveryCause::Deadline, .. }) => {}
                    _ => return,
                }
            }
        });
    }
}
