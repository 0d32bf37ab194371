//! The front's [`FleetLink`] and [`SharedEvents`] over the ledger's fleet bus: the one place the two meet, so the
//! front never imports the ledger. Only types are translated here, and the events an agent's streams write are
//! batched (each batch one statement, written as the previous one commits); the behaviour is the ledger's bus and
//! the front's `fleet` and `replay`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use tokio::sync::mpsc;

use crate::front::Front;
use crate::front::fleet::{Fleet, FleetLink, Sending};
use crate::front::replay::{Kept, KeptEvent, SharedEvents};
use crate::ledger::{FleetBus, Heard, LedgerStore, StreamEvent};

/// The most events one statement writes.
const BATCH: usize = 512;

/// The ledger's bus as the front's link to the other replicas.
struct BusLink(Arc<FleetBus>);

impl FleetLink for BusLink {
    fn send<'a>(&'a self, to: Option<&'a str>, body: String) -> Sending<'a> {
        Box::pin(async move { self.0.send(to, &body).await.map_err(|error| error.to_string()) })
    }
}

/// What a replica sharing its ledger with others gets: the front's fleet, the task that hands the front what the
/// others send (to start once the front exists), and the store of streams' events (`None` when none are kept).
pub(super) struct Joined {
    pub(super) fleet: Arc<Fleet>,
    pub(super) hearing: Hearing,
    pub(super) events: Option<Arc<dyn SharedEvents>>,
}

/// Joins the fleet when `store` is shared by replicas (`None`: one replica); `keep` events of each stream are
/// kept for `kept_for` (none when `keep` is 0).
pub(super) fn join(store: &LedgerStore, replica: &str, keep: usize, kept_for: Duration) -> Option<Joined> {
    let (bus, heard) = store.fleet_bus(replica)?;
    let bus = Arc::new(bus);
    let events = u32::try_from(keep).ok().filter(|keep| *keep > 0).map(|keep| {
        let (queue, queued) = mpsc::unbounded_channel();
        tokio::spawn(write_events(Arc::clone(&bus), queued, keep, kept_for));
        Arc::new(LedgerEvents { bus: Arc::clone(&bus), queue }) as Arc<dyn SharedEvents>
    });
    Some(Joined { fleet: Arc::new(Fleet::new(Arc::new(BusLink(bus)))), hearing: Hearing(heard), events })
}

/// The ledger's stream events as the front's [`SharedEvents`].
struct LedgerEvents {
    bus: Arc<FleetBus>,
    queue: mpsc::UnboundedSender<KeptEvent>,
}

impl SharedEvents for LedgerEvents {
    fn keep(&self, event: KeptEvent) {
        let _ = self.queue.send(event);
    }

    fn after<'a>(&'a self, stream: &'a str, session: &'a str, after: Option<u64>) -> Kept<'a> {
        Box::pin(async move {
            let after = after.map_or(Some(-1), |after| i64::try_from(after).ok())?;
            let rows = self.bus.events_after(stream, session, after).await;
            let rows = rows.map_err(|error| tracing::warn!(%error, "fleet: cannot read a stream's kept events"));
            Some(rows.ok()?.into_iter().filter_map(kept).collect())
        })
    }
}

fn kept(row: StreamEvent) -> Option<KeptEvent> {
    let seq = u64::try_from(row.seq).ok()?;
    Some(KeptEvent { stream: row.stream, seq, session: row.session, text: Bytes::from(row.event), done: row.done })
}

/// Writes queued events in batches until the queue closes; a batch that fails is logged and dropped (its stream
/// is still resumable on the replica that runs it).
async fn write_events(
    bus: Arc<FleetBus>,
    mut queued: mpsc::UnboundedReceiver<KeptEvent>,
    keep: u32,
    kept_for: Duration,
) {
    while let Some(first) = queued.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH
            && let Ok(next) = queued.try_recv()
        {
            batch.push(next);
        }
        let rows: Vec<StreamEvent> = batch.into_iter().filter_map(row).collect();
        if let Err(error) = bus.keep_events(&rows, keep, kept_for).await {
            tracing::warn!(%error, events = rows.len(), "fleet: stream events were not kept for other replicas");
        }
    }
}

fn row(event: KeptEvent) -> Option<StreamEvent> {
    let event_text = String::from_utf8(event.text.to_vec()).ok()?;
    let seq = i64::try_from(event.seq).ok()?;
    Some(StreamEvent { stream: event.stream, seq, session: event.session, event: event_text, done: event.done })
}

/// What the other replicas send, not yet handed to the front.
pub(super) struct Hearing(mpsc::UnboundedReceiver<Heard>);

impl Hearing {
    /// Hands every message to `front` until the bus closes.
    pub(super) async fn serve(mut self, front: Arc<Front>) {
        while let Some(Heard { from, body, age }) = self.0.recv().await {
            front.hear_fleet(from, &body, age);
        }
    }
}
