//! The fleet bus: short messages between the replicas sharing this ledger, for what must reach the replica that
//! holds a call (an agent's answer to a relayed request, a cancel, a continued call, a stream's live events).
//!
//! Rules:
//! - Only PostgreSQL is shared by replicas, so only it carries a bus (`LISTEN`/`NOTIFY`, see the store's `bus`);
//!   with memory or SQLite there is one replica and [`LedgerStore::fleet_bus`] gives `None`.
//! - A replica is named by its instance id ([`super::instance_id`]), the owner its claims carry.
//! - Bodies are opaque text; what they mean is the caller's. Delivery is at most once; a message sent while its
//!   receiver was reconnecting to PostgreSQL waits for it (up to five minutes), and says how long it waited.

use std::time::Duration;

use tokio::sync::mpsc;

use super::LedgerStore;
use super::error::LedgerError;
use super::postgres::PgBus;

/// A message heard on the bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    /// The sending replica.
    pub from: String,
    pub body: String,
    /// How long it waited for its receiver (measured by the database's clock, as it was sent).
    pub age: Duration,
}

/// One event of an agent's SSE stream, kept for a resumption on any replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEvent {
    pub stream: String,
    /// Its place in the stream (the event id's number).
    pub seq: i64,
    /// The agent session that opened the stream: only it may resume it.
    pub session: String,
    /// The event as written on the wire.
    pub event: String,
    /// The stream ended here (the event is empty).
    pub done: bool,
}

/// This replica's end of the bus; dropping it stops listening.
#[derive(Debug)]
pub struct FleetBus(PgBus);

impl LedgerStore {
    /// This replica's end of the fleet bus, listening as `replica`, and what it hears; `None` for a store only one
    /// replica uses.
    pub fn fleet_bus(&self, replica: &str) -> Option<(FleetBus, mpsc::UnboundedReceiver<Heard>)> {
        match self {
            LedgerStore::Postgres(store) => {
                let (bus, heard) = store.fleet_bus(replica);
                Some((FleetBus(bus), heard))
            }
            LedgerStore::Memory(_) | LedgerStore::Sqlite(_) => None,
        }
    }
}

impl FleetBus {
    /// The replica this end belongs to.
    pub fn replica(&self) -> &str {
        self.0.replica()
    }

    /// Sends `body` to the replica `to`, or to every other replica (`None`).
    pub async fn send(&self, to: Option<&str>, body: &str) -> Result<(), LedgerError> {
        self.0.send(to, body).await
    }

    /// Keeps `events` for resumptions: each stream's last `keep` events, none older than `kept_for`.
    pub async fn keep_events(&self, events: &[StreamEvent], keep: u32, kept_for: Duration) -> Result<(), LedgerError> {
        self.0.keep_events(events, keep, kept_for).await
    }

    /// The kept events of `stream` after `after`, if `session` opened it.
    pub async fn events_after(&self, stream: &str, session: &str, after: i64) -> Result<Vec<StreamEvent>, LedgerError> {
        self.0.events_after(stream, session, after).await
    }
}
