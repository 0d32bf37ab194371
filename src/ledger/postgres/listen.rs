//! The `LISTEN` connection: wakes this process's waiters when any replica settles a claim.
//!
//! Rules:
//! - A connection of its own (notifications arrive on the connection that listens, and the query connection is
//!   replaced whenever it breaks); it reconnects with a capped backoff for as long as the store lives.
//! - After every (re)connection all waiters are woken once, because notifications sent while nobody listened are
//!   lost; each then re-reads its claim, so a wake-up too many costs a read, never a wrong answer.
//! - The task ends when the store is dropped (its stop channel closes).

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_postgres::{AsyncMessage, Config, NoTls};

use crate::ledger::waiters::Waiters;

const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Listens on `channel` until `stop` closes.
pub(super) async fn run(config: Config, channel: String, waiters: Arc<Waiters>, mut stop: oneshot::Receiver<()>) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        tokio::select! {
            _ = &mut stop => return,
            ended = listen_once(&config, &channel, &waiters) => match ended {
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
async fn listen_once(config: &Config, channel: &str, waiters: &Waiters) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let forward = async {
        while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
            if let AsyncMessage::Notification(notification) = message? {
                waiters.wake(notification.payload());
            }
        }
        Ok(())
    };
    tokio::pin!(forward);
    // The connection must be driven while LISTEN is sent, so both run together until LISTEN is acknowledged.
    let listen = format!("LISTEN \"{channel}\"");
    tokio::select! {
        ended = &mut forward => return ended,
        listening = client.batch_execute(&listen) => listening?,
    }
    waiters.wake_all();
    let ended = forward.await;
    // The client lives until here: dropping it would close the connection.
    drop(client);
    ended
}
