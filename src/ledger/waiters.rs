//! Single-flight wake-ups: calls waiting for another call with the same claim key to settle.
//!
//! Rules:
//! - One [`Notify`] per watched key, shared by all its waiters and removed when the last one leaves, so a
//!   thousand waiters on one key cost one map entry and one wake-up, and idle keys cost nothing.
//! - A wake-up carries no data: a woken waiter reads the claim from the store, so wake-ups may be spurious or
//!   duplicated (a local settle and a Postgres notification for the same change) without harm.
//! - A waiter registers interest before it reads the store, so a settle between the read and the wait is never
//!   missed.
//! - Stores call [`Waiters::wake`] after every change that takes a claim out of `in_flight` (once it is
//!   committed); changes made by other processes arrive through Postgres `LISTEN` or the SQLite poll, which
//!   also call it. The poll sleeps in [`Waiters::watching`] while no key is waited on.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::error::LedgerError;
use super::types::{ClaimKey, ClaimRecord, ClaimState, WaitOutcome};

/// The keys some task is waiting on, in one store.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    slots: Mutex<HashMap<String, Arc<Notify>>>,
    /// Told whenever a key gets its first waiter, for a poll that sleeps while nobody waits.
    first_waiter: Notify,
}

/// One waiter's registration; dropping it removes the key's slot when it was the last waiter.
struct Watch<'a> {
    waiters: &'a Waiters,
    key: &'a str,
    notify: Arc<Notify>,
}

impl Waiters {
    fn watch<'a>(&'a self, key: &'a str) -> Watch<'a> {
        let (notify, first) = {
            let mut slots = self.slots.lock();
            let before = slots.len();
            let notify = slots.entry(key.to_owned()).or_default().clone();
            (notify, slots.len() > before)
        };
        if first {
            self.first_waiter.notify_waiters();
        }
        Watch { waiters: self, key, notify }
    }

    /// Returns once some key is waited on (at once if one is).
    pub(crate) async fn watching(&self) {
        loop {
            let first = self.first_waiter.notified();
            tokio::pin!(first);
            // Registered before the map is read, so a waiter arriving in between is not missed.
            first.as_mut().enable();
            if !self.slots.lock().is_empty() {
                return;
            }
            first.await;
        }
    }

    /// Wakes every task waiting on `key`.
    pub(crate) fn wake(&self, key: &str) {
        if let Some(notify) = self.slots.lock().get(key) {
            notify.notify_waiters();
        }
    }

    /// Wakes the waiters of each key (claims a bulk update settled); returns how many keys there were.
    pub(crate) fn wake_each(&self, keys: &[String]) -> u64 {
        for key in keys {
            self.wake(key);
        }
        keys.len() as u64
    }

    /// Wakes every waiter (after a reconnect, when notifications may have been missed).
    pub(crate) fn wake_all(&self) {
        for notify in self.slots.lock().values() {
            notify.notify_waiters();
        }
    }

    /// The keys currently waited on.
    pub(crate) fn watched(&self) -> Vec<String> {
        self.slots.lock().keys().cloned().collect()
    }

    /// Waits until the claim `key` leaves `in_flight` (read with `read`), or `deadline` passes.
    pub(crate) async fn wait_settled<F, Fut>(
        &self,
        key: &ClaimKey,
        deadline: Instant,
        read: F,
    ) -> Result<WaitOutcome, LedgerError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Option<ClaimRecord>, LedgerError>>,
    {
        let watch = self.watch(key.as_str());
        loop {
            let notified = watch.notify.notified();
            tokio::pin!(notified);
            // Registered before the read: a wake-up from here on is kept until the future is awaited.
            notified.as_mut().enable();
            match read().await? {
                None => return Ok(WaitOutcome::Released),
                Some(record) if record.state != ClaimState::InFlight => {
                    return Ok(WaitOutcome::Settled(Box::new(record)));
                }
                Some(_) => {}
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(WaitOutcome::TimedOut);
            }
        }
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut slots = self.waiters.slots.lock();
        // Clones only happen under this lock, so the count is exact: the map's handle and ours means we are last.
        if Arc::strong_count(&self.notify) == 2 {
            slots.remove(self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_disappear_with_their_last_waiter() {
        let waiters = Waiters::default();
        let first = waiters.watch("k");
        let second = waiters.watch("k");
        assert_eq!(waiters.watched(), ["k"]);
        drop(first);
        assert_eq!(waiters.watched(), ["k"]);
        drop(second);
        assert!(waiters.watched().is_empty());
        waiters.wake("k");
        waiters.wake_all();
    }

    #[tokio::test]
    async fn watching_returns_once_a_key_is_waited_on() {
        let waiters = Arc::new(Waiters::default());
        let watching = {
            let waiters = waiters.clone();
            tokio::spawn(async move { waiters.watching().await })
        };
        tokio::task::yield_now().await;
        assert!(!watching.is_finished(), "nobody waits yet");
        let watch = waiters.watch("k");
        watching.await.expect("woken by the first waiter");
        waiters.watching().await;
        drop(watch);
    }
}
