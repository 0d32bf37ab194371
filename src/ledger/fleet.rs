//! The fleet bus: short messages between the replicas sharing this ledger, for what must reach the replica that
//! holds a call (an agent's answer to a relayed request, a cancel, a continued call, a stream's live events).
//!
//! Rules:
//! - Only PostgreSQL is shared by replicas, so only it carries a bus (`LISTEN`/`NOTIFY`, see the store's `bus`);
//!   with memory or SQLite there is one replica and [`LedgerStore::fleet_bus`] gives `None`.
//! - A replica is named by its instance id ([`super::instance_id`]), the owner its claims carry.
//! - Bodies are opaque text; what they mean is the caller's. Delivery is at most once and in order per sender.

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
}
