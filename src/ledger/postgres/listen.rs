//! The `LISTEN` connections: one wakes this process's waiters when any replica settles a claim, and passes on
//! the revocations any replica records (see [`crate::ledger::revocations`]); the fleet bus has its own
//! ([`super::bus`]). Both run the same reconnecting loop over a [`Hearing`].
//!
//! Rules:
//! - A connection of its own (notifications arrive on the connection that listens, and the query connection is
//!   replaced whenever it breaks); it reconnects with a capped backoff for as long as the store lives.
//! - After every (re)connection all waiters are woken once, because notifications sent while nobody listened are
//!   lost; each then re-reads its claim, so a wake-up too many costs a read, never a wrong answer. For the same
//!   reason revocation subscribers are told [`RevocationEvent::Missed`] and reload.
//! - The task ends when the store is dropped (its stop channel closes).

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, oneshot};
use tokio_postgres::{AsyncMessage, Config, NoTls};

use crate::ledger::revocations::{Revocation, RevocationEvent};
use crate::ledger::waiters::Waiters;

const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Where notifications go.
pub(super) struct Listeners {
    /// The settled-claims channel and the waiters it wakes.
    pub(super) settled: String,
    pub(super) waiters: Arc<Waiters>,
    /// The revocations channel and the subscribers it feeds.
    pub(super) revoked: String,
    pub(super) revocations: broadcast::Sender<RevocationEvent>,
}

/// What one listening connection listens to, and where what it hears goes.
pub(super) trait Hearing: Send + Sync {
    /// The channels to `LISTEN` on (names made by [`super::schema::Names`], safe to quote).
    fn channels(&self) -> Vec<String>;
    fn hear(&self, channel: &str, payload: &str);
    /// After a (re)connection: notifications sent while nobody listened were not heard.
    fn missed_some(&self);
}

impl Hearing for Listeners {
    fn channels(&self) -> Vec<String> {
        vec![self.settled.clone(), self.revoked.clone()]
    }

    fn hear(&self, channel: &str, payload: &str) {
        if channel != self.revoked {
            return self.waiters.wake(payload);
        }
        match Revocation::from_announcement(payload) {
            // Nobody subscribed is not an error.
            Some(revocation) => drop(self.revocations.send(RevocationEvent::Recorded(revocation))),
            None => tracing::warn!(payload, "ledger: ignored a malformed revocation announcement"),
        }
    }

    /// Whatever was announced while nobody listened must be re-read.
    fn missed_some(&self) {
        self.waiters.wake_all();
        let _ = self.revocations.send(RevocationEvent::Missed);
    }
}

/// Listens until `stop` closes.
pub(super) async fn run(config: Config, listeners: impl Hearing, mut stop: oneshot::Receiver<()>) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        tokio::select! {
            _ = &mut stop => return,
            ended = listen_once(&config, &listeners) => match ended {
                // A session that got as far as listening earns a quick reconnect.
                Ok(()) => backoff = FIRST_BACKOFF,
                Err(error) => tracing::warn!(%error, "ledger: PostgreSQL LISTEN connection failed; reconnecting"),
            },
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One connection's life: connect, listen, forward notifications until the connection ends.
async fn listen_once(config: &Config, listeners: &impl Hearing) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let forward = async {
        while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
            if let AsyncMessage::Notification(notification) = message? {
                listeners.hear(notification.channel(), notification.payload());
            }
        }
        Ok(())
    };
    tokio::pin!(forward);
    // The connection must be driven while LISTEN is sent, so both run together until LISTEN is acknowledged.
    let listen: String = listeners.channels().iter().map(|channel| format!("LISTEN \"{channel}\"; ")).collect();
    tokio::select! {
        ended = &mut forward => return ended,
        listening = client.batch_execute(&listen) => listening?,
    }
    listeners.missed_some();
    let ended = forward.await;
    // The client lives until here: dropping it would close the connection.
    drop(client);
    ended
}
