//! The front's [`FleetLink`] over the ledger's fleet bus: the one place the two meet, so the front never imports
//! the ledger. Only types are translated here; the behaviour is the ledger's bus and the front's `fleet`.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::front::Front;
use crate::front::fleet::{Fleet, FleetLink, Sending};
use crate::ledger::{FleetBus, Heard, LedgerStore};

/// The ledger's bus as the front's link to the other replicas.
struct BusLink(FleetBus);

impl FleetLink for BusLink {
    fn send<'a>(&'a self, to: Option<&'a str>, body: String) -> Sending<'a> {
        Box::pin(async move { self.0.send(to, &body).await.map_err(|error| error.to_string()) })
    }
}

/// The front's fleet when `store` is shared by replicas (`None`: one replica), and the task that hands the front
/// what the others send, to start once the front exists.
pub(super) fn join(store: &LedgerStore, replica: &str) -> Option<(Arc<Fleet>, Hearing)> {
    let (bus, heard) = store.fleet_bus(replica)?;
    Some((Arc::new(Fleet::new(Arc::new(BusLink(bus)))), Hearing(heard)))
}

/// What the other replicas send, not yet handed to the front.
pub(super) struct Hearing(mpsc::UnboundedReceiver<Heard>);

impl Hearing {
    /// Hands every message to `front` until the bus closes.
    pub(super) async fn serve(mut self, front: Arc<Front>) {
        while let Some(Heard { from, body }) = self.0.recv().await {
            front.hear_fleet(from, &body);
        }
    }
}
