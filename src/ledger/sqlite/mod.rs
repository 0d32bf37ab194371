//! The SQLite store: the embedded default, one file (normally `<data_dir>/ledger.db`).
//!
//! Rules:
//! - Every call is a job for the [`worker`] thread; nothing blocks the async runtime. Once queued, a job runs
//!   even if its caller is dropped, and a claim whose caller went away is released (see [`super::detach`]).
//! - Atomicity comes from SQLite itself: each operation is one statement (see [`ops`]), serialised by the
//!   database's write lock, so it also holds when several processes share the file.
//! - Waiters in this process are woken right after a local settle; changes made by another process on the same
//!   file are noticed by a poll every [`POLL_INTERVAL`] that runs only while someone waits, and reads only the
//!   watched keys.

mod backend_tokens;
mod batch;
mod checkpoint;
mod ops;
mod revocations;
mod worker;

use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::detach::{Abandon, Delivery};
use super::digest::StoredResult;
use super::error::LedgerError;
use super::rules::{EXPIRED_NOTE, ORPHANED_NOTE, Settle};
use super::types::{ClaimKey, ClaimOutcome, ClaimRecord, ListFilter, NewClaim, Resolution, new_claim_id};
use super::waiters::Waiters;
use worker::Worker;

/// How often waiters check for changes made by other processes.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    worker: Worker,
    waiters: Waiters,
}

impl SqliteStore {
    /// Opens (creating and migrating as needed) the file at `path`; must run inside a Tokio runtime.
    pub(crate) async fn open(path: &Path) -> Result<SqliteStore, LedgerError> {
        let worker = Worker::start(path.to_path_buf()).await?;
        let inner = Arc::new(Inner { worker, waiters: Waiters::default() });
        tokio::spawn(poll_other_processes(Arc::downgrade(&inner)));
        Ok(SqliteStore { inner })
    }

    pub(crate) fn waiters(&self) -> &Waiters {
        &self.inner.waiters
    }

    pub(crate) async fn claim(&self, new: NewClaim) -> Result<ClaimOutcome, LedgerError> {
        let id = new_claim_id()?;
        let now = SystemTime::now();
        let abandon = self.abandon();
        let delivery = self
            .inner
            .worker
            .run(move |db| ops::claim(db, &new, id, now).map(|outcome| Delivery::new(outcome, abandon)));
        delivery.await?.take()
    }

    /// Releases a claim whose caller went away (see [`super::detach`]); runs on whatever thread drops it.
    fn abandon(&self) -> Abandon {
        let queue = self.inner.worker.queue();
        Box::new(move |record: ClaimRecord| {
            queue(Box::new(move |db| {
                if let Err(error) = ops::settle(db, &record.key, &record.owner, Settle::Release, SystemTime::now()) {
                    tracing::warn!(%error, "ledger: cannot release a claim whose caller went away");
                }
            }));
        })
    }

    pub(crate) async fn complete(
        &self,
        key: &ClaimKey,
        owner: &str,
        result: &Value,
        max_result: usize,
    ) -> Result<(), LedgerError> {
        let stored = StoredResult::bound(result, max_result);
        self.settle(key, owner, move |db, key, owner, now| ops::settle(db, key, owner, Settle::Complete(&stored), now))
            .await
    }

    pub(crate) async fn mark_unknown(&self, key: &ClaimKey, owner: &str, error: &str) -> Result<(), LedgerError> {
        let error = error.to_owned();
        self.settle(key, owner, move |db, key, owner, now| {
            ops::settle(db, key, owner, Settle::MarkUnknown(&error), now)
        })
        .await
    }

    pub(crate) async fn release(&self, key: &ClaimKey, owner: &str) -> Result<(), LedgerError> {
        self.settle(key, owner, |db, key, owner, now| ops::settle(db, key, owner, Settle::Release, now)).await
    }

    /// Runs a settle job for `key` on the worker, then wakes the key's waiters.
    async fn settle<F>(&self, key: &ClaimKey, owner: &str, job: F) -> Result<(), LedgerError>
    where
        F: FnOnce(&worker::Db, &ClaimKey, &str, SystemTime) -> Result<(), LedgerError> + Send + 'static,
    {
        let (job_key, owner, now) = (key.clone(), owner.to_owned(), SystemTime::now());
        self.inner.worker.run(move |db| job(db, &job_key, &owner, now)).await?;
        self.inner.waiters.wake(key.as_str());
        Ok(())
    }

    pub(crate) async fn get(&self, key: &ClaimKey) -> Result<Option<ClaimRecord>, LedgerError> {
        let key = key.clone();
        self.inner.worker.run(move |db| ops::get(db, key.as_str())).await
    }

    pub(crate) async fn renew_leases(&self, owner: &str, lease_until: SystemTime) -> Result<u64, LedgerError> {
        let owner = owner.to_owned();
        self.inner.worker.run(move |db| ops::renew(db, &owner, lease_until)).await
    }

    pub(crate) async fn expire_leases(&self, now: SystemTime) -> Result<u64, LedgerError> {
        let keys = self.inner.worker.run(move |db| ops::expire(db, now, EXPIRED_NOTE)).await?;
        Ok(self.inner.waiters.wake_each(&keys))
    }

    pub(crate) async fn orphan(&self, owner: &str) -> Result<u64, LedgerError> {
        let owner = owner.to_owned();
        let now = SystemTime::now();
        let keys = self.inner.worker.run(move |db| ops::orphan(db, &owner, ORPHANED_NOTE, now)).await?;
        Ok(self.inner.waiters.wake_each(&keys))
    }

    pub(crate) async fn purge(&self, older_than: SystemTime) -> Result<u64, LedgerError> {
        self.inner.worker.run(move |db| ops::purge(db, older_than)).await
    }

    pub(crate) async fn list(&self, filter: &ListFilter) -> Result<Vec<ClaimRecord>, LedgerError> {
        let filter = filter.clone();
        self.inner.worker.run(move |db| ops::list(db, &filter)).await
    }

    pub(crate) async fn resolve(&self, key: &ClaimKey, resolution: Resolution) -> Result<(), LedgerError> {
        let (job_key, now) = (key.clone(), SystemTime::now());
        self.inner.worker.run(move |db| ops::resolve(db, &job_key, resolution, now)).await?;
        self.inner.waiters.wake(key.as_str());
        Ok(())
    }

    pub(crate) async fn ping(&self) -> Result<(), LedgerError> {
        self.inner.worker.run(|db| ops::ping(db)).await
    }
}

/// Wakes waiters whose claim another process settled; ends when the store is dropped.
async fn poll_other_processes(inner: Weak<Inner>) {
    let mut ticks = tokio::time::interval(POLL_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let watched = inner.waiters.watched();
        if watched.is_empty() {
            continue;
        }
        // A failed poll is retried on the next tick; the waiters' own reads report the error if it persists.
        if let Ok(settled) = inner.worker.run(move |db| ops::settled_among(db, watched)).await {
            for key in settled {
                inner.waiters.wake(&key);
            }
        }
    }
}
