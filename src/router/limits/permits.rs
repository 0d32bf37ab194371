//! Concurrency across replicas: with a PostgreSQL ledger, the permits of a `concurrency` limit are leased from a
//! counter row every replica shares, so the fleet runs at most `concurrency` calls of a principal at once.
//!
//! Rules:
//! - Time is cut into epochs of [`EPOCH`]. Each replica registers a **lease** — how many permits it may use —
//!   in the shared row of (limit, principal), whose three integers are the epoch, the leases registered in it,
//!   and the leases registered in the epoch before and not renewed since ([`Row`]). The fleet's permits out are
//!   the sum of the last two, and a registration never makes it exceed the limit.
//! - A replica runs a call when its own calls in flight are below its lease; otherwise it grows its lease by one
//!   (one compare-and-swap). Every [`RENEW_EVERY`] it renews each lease into the current epoch, shrunk to the
//!   calls it has running ([`Limits::renew_permits`]), so idle permits go back to the fleet within an epoch and
//!   a replica that stops (or crashes) stops holding any two epochs later.
//! - So the store sees one write per replica and principal per epoch, plus one per lease growth; a released
//!   permit is not written at all.
//! - Bound: a lease is registered before it is used and renewed before it lapses, so the fleet never runs more
//!   than `concurrency` calls at once — except when a replica cannot reach the store for a whole epoch: its lease
//!   then lapses while its calls still run, and the fleet may run up to that lease more (at most `concurrency`).
//!   Such a replica cannot claim new calls either, since claims need the same store.
//! - If the store fails, the limit counts this gateway's calls only (logged), as rates and quotas do.

use std::sync::Arc;
use std::time::Duration;

use super::clock::nanos;
use super::counters::Usage;
use super::limit::Limit;
use super::refusal::{Refusal, Violated};
use super::{Held, Limits, Took};
use tokio::task::JoinHandle;

use crate::ledger::{CounterRow, LedgerError, LedgerStore};
use crate::router::CallRouter;

/// How long an epoch lasts.
pub const EPOCH: Duration = Duration::from_secs(1);
/// How often leases are renewed: twice an epoch, so none lapses while its replica runs.
pub const RENEW_EVERY: Duration = Duration::from_millis(500);
/// Compare-and-swap attempts before the store is taken as unavailable.
const ATTEMPTS: usize = 16;

/// This gateway's lease of one (limit, principal).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Permits {
    /// How many permits it registered.
    pub lease: u32,
    /// The epoch it registered them in.
    pub epoch: u64,
}

impl Permits {
    /// The permits usable in `epoch`: the lease while it is registered in this epoch or the one before.
    fn usable(&self, epoch: u64) -> u32 {
        if self.epoch + 1 >= epoch { self.lease } else { 0 }
    }
}

/// The shared row as this module reads it: `tat` holds the leases pending renewal, `window` the epoch, `used`
/// the leases registered in it.
struct Row {
    epoch: u64,
    registered: u64,
    pending: u64,
}

impl Row {
    /// `row` as of `epoch`: leases registered an epoch ago are pending; older ones have lapsed.
    fn at(row: CounterRow, epoch: u64) -> Row {
        let unsigned = |value: i64| u64::try_from(value).unwrap_or(0);
        let (was, registered, pending) = (unsigned(row.window), unsigned(row.used), unsigned(row.tat));
        match epoch.saturating_sub(was) {
            0 => Row { epoch, registered, pending },
            1 => Row { epoch, registered: 0, pending: registered },
            _ => Row { epoch, registered: 0, pending: 0 },
        }
    }

    fn to_row(&self) -> CounterRow {
        let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        CounterRow { tat: signed(self.pending), window: signed(self.epoch), used: signed(self.registered) }
    }

    /// Replaces `mine` by a lease of `want` permits, or as many as are free but never fewer than `running`;
    /// the lease registered.
    fn register(&mut self, mine: Permits, want: u32, running: u32, max: u32) -> u32 {
        let lease = u64::from(mine.lease);
        if mine.epoch == self.epoch {
            self.registered = self.registered.saturating_sub(lease);
        } else if mine.epoch + 1 == self.epoch {
            self.pending = self.pending.saturating_sub(lease);
        }
        let free = u64::from(max).saturating_sub(self.registered + self.pending);
        let got = u64::from(want).min(free).max(u64::from(running));
        self.registered += got;
        u32::try_from(got).unwrap_or(u32::MAX)
    }
}

/// The shared row's key of `limit`'s permits.
fn row_key(limit: &Limit) -> String {
    format!("{}/permits", limit.shared_key)
}

fn epoch_of(now: u64) -> u64 {
    now / nanos(EPOCH)
}

/// Takes a permit of `limit` for `key`, growing this gateway's lease when it is spent. `None`: the store failed,
/// and the caller counts this limit per gateway.
pub async fn take(
    limit: &Arc<Limit>,
    store: &LedgerStore,
    key: &str,
    now: u64,
    held: &mut Held,
) -> Option<Result<(), Refusal>> {
    let epoch = epoch_of(now);
    if take_local(limit, key, epoch, held) {
        return Some(Ok(()));
    }
    // One lease change at a time per limit, so a registration always replaces the one the store holds.
    let _changing = limit.permits.lock().await;
    if take_local(limit, key, epoch, held) {
        return Some(Ok(()));
    }
    let (mine, running) = lease_of(limit, key, now);
    match relet(limit, store, key, epoch, Relet { mine, want: running + 1, running }).await {
        Err(error) => {
            tracing::warn!(limit = %limit.spec.label, %error, "the shared permits are unavailable; counting here");
            None
        }
        Ok(_) if take_local(limit, key, epoch, held) => Some(Ok(())),
        Ok(_) => Some(Err(Refusal::new(&limit.spec, Violated::Concurrency, nanos(EPOCH)))),
    }
}

/// Takes a permit of the lease when one is free.
fn take_local(limit: &Arc<Limit>, key: &str, epoch: u64, held: &mut Held) -> bool {
    let mut usage = limit.usage.lock();
    let Some(entry) = usage.entries.get_mut(key) else { return false };
    if entry.in_flight >= entry.permits.usable(epoch) {
        return false;
    }
    entry.in_flight += 1;
    held.taken.push(Took { limit: Arc::clone(limit), key: key.into(), counted: None, permit: true });
    true
}

/// This gateway's lease of `key` and its calls in flight.
fn lease_of(limit: &Limit, key: &str, now: u64) -> (Permits, u32) {
    let period = limit.period();
    let mut usage = limit.usage.lock();
    let entry = usage.entry(key, |usage: &mut Usage| !usage.is_idle(period, now));
    (entry.permits, entry.in_flight)
}

/// A change of this gateway's lease: `mine` replaced by `want` permits, never fewer than the `running` calls.
#[derive(Debug, Clone, Copy)]
struct Relet {
    mine: Permits,
    want: u32,
    running: u32,
}

/// Registers `relet` for `key` in `epoch`; the lease registered.
async fn relet(limit: &Limit, store: &LedgerStore, key: &str, epoch: u64, relet: Relet) -> Result<u32, LedgerError> {
    let (row_key, max) = (row_key(limit), limit.spec.concurrency.unwrap_or_default());
    for _ in 0..ATTEMPTS {
        let read = store.limit_counter(&row_key, key).await?;
        let mut row = Row::at(read.unwrap_or_default(), epoch);
        let lease = row.register(relet.mine, relet.want, relet.running, max);
        if store.swap_limit_counter(&row_key, key, read, row.to_row()).await? {
            if let Some(entry) = limit.usage.lock().entries.get_mut(key) {
                entry.permits = Permits { lease, epoch };
            }
            return Ok(lease);
        }
    }
    Err(LedgerError::unavailable(format!("the permits of limit {} kept changing", limit.spec.label)))
}

/// Renews `router`'s leases of shared permits every [`RENEW_EVERY`] (the limits of the routing in force, so a
/// reload's limits too). Without a shared store (SQLite, memory) there is nothing to renew and the task ends at
/// once: whether counters are shared is fixed by the ledger, which a reload keeps.
pub fn renew(router: &Arc<CallRouter>) -> JoinHandle<()> {
    let router = Arc::clone(router);
    tokio::spawn(async move {
        if !router.routing.load().limits.is_shared() {
            return;
        }
        let mut ticks = tokio::time::interval(RENEW_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let routing = router.routing.load();
            routing.limits.renew_permits().await;
        }
    })
}

impl Limits {
    /// Renews this gateway's leases of permits into the current epoch, each shrunk to the calls running under
    /// it; forgets the leases of principals with nothing running.
    pub async fn renew_permits(&self) {
        let Some(store) = &self.shared else { return };
        let now = self.clock.now();
        let epoch = epoch_of(now);
        for limit in self.set.iter().filter(|limit| limit.spec.concurrency.is_some()) {
            let _changing = limit.permits.lock().await;
            let leases: Vec<(Box<str>, Permits, u32)> = {
                let usage = limit.usage.lock();
                let due = usage.entries.iter().filter(|(_, usage)| usage.permits.lease > 0);
                due.map(|(key, usage)| (key.clone(), usage.permits, usage.in_flight)).collect()
            };
            for (key, mine, running) in
                leases.into_iter().filter(|(_, mine, running)| mine.epoch < epoch || mine.lease > *running)
            {
                if let Err(error) = relet(limit, store, &key, epoch, Relet { mine, want: running, running }).await {
                    tracing::warn!(limit = %limit.spec.label, %error, "could not renew the shared permits");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(epoch: i64, registered: i64, pending: i64) -> CounterRow {
        CounterRow { tat: pending, window: epoch, used: registered }
    }

    #[test]
    fn leases_move_to_pending_after_an_epoch_and_lapse_after_two() {
        let shared = row(10, 3, 1);
        let same = Row::at(shared, 10);
        assert_eq!((same.registered, same.pending), (3, 1));
        let next = Row::at(shared, 11);
        assert_eq!((next.epoch, next.registered, next.pending), (11, 0, 3));
        let later = Row::at(shared, 12);
        assert_eq!((later.registered, later.pending), (0, 0));
    }

    #[test]
    fn a_registration_replaces_the_old_lease_and_never_exceeds_the_limit() {
        // Two permits registered by another replica, two pending from this one's lease of the epoch before.
        let mut shared = Row::at(row(10, 2, 0), 11);
        shared.registered = 2;
        let mine = Permits { lease: 2, epoch: 10 };
        assert_eq!(shared.pending, 2);
        assert_eq!(shared.register(mine, 3, 1, 4), 2, "its old two are free again, the other's two are not");
        assert_eq!((shared.registered, shared.pending), (4, 0));
        let mine = Permits { lease: 2, epoch: 11 };
        assert_eq!(shared.register(mine, 0, 0, 4), 0, "a renewal with nothing running gives everything back");
        assert_eq!(shared.registered, 2);
        let mut full = Row::at(row(11, 4, 0), 11);
        assert_eq!(full.register(Permits::default(), 1, 0, 4), 0, "nothing free");
        assert_eq!(full.register(Permits::default(), 1, 1, 4), 1, "what runs stays registered");
    }

    #[test]
    fn a_lease_is_usable_in_its_epoch_and_the_next() {
        let permits = Permits { lease: 3, epoch: 7 };
        assert_eq!((permits.usable(7), permits.usable(8), permits.usable(9)), (3, 3, 0));
    }
}
