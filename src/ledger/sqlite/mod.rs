//! The SQLite store: the embedded default, one file (normally `<data_dir>/ledger.db`).
//!
//! Rules:
//! - Every call is a job for the [`worker`] thread; nothing blocks the async runtime. Once queued, a job runs
//!   even if its caller is dropped, and a claim whose caller went away is released (see [`super::detach`]).
//! - Atomicity comes from SQLite itself: each operation is one statement (see [`ops`]), serialised by the
//!   database's write lock, so it also holds when several processes share the file; jobs that queue up together
//!   share one transaction, each in a savepoint of its own (see [`batch`]).
//! - A completion nobody waits for ([`SqliteStore::settle_soon`]) is parked and commits with the next job, or
//!   on its own once it waited [`LINGER`](super::background::LINGER) (see [`super::background`]).
//! - Waiters in this process are woken right after a local settle commits; changes made by another process on
//!   the same file are noticed by a poll every [`POLL_INTERVAL`] that runs only while someone waits (the task
//!   sleeps without a timer otherwise), and reads only the watched keys.

mod alone;
mod approvals;
mod backend_tokens;
mod batch;
mod checkpoint;
mod limit_counters;
mod ops;
mod pins;
mod revocations;
mod schema;
mod tasks;
mod worker;

use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, SystemTime};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::raw_json::RawJson;

use super::at_rest::AtRest;
use super::background::{self, LINGER, Pending, QueuedSettle, Resettle};
use super::detach::{Abandon, Delivery};
use super::digest::StoredResult;
use super::error::LedgerError;
use super::resolutions::{Pick, ResolutionRecord, Resolve};
use super::rules::{EXPIRED_NOTE, ORPHANED_NOTE, Settle};
use super::sql::purge_in_slices;
use super::stats::WriterStats;
use super::types::{ClaimKey, ClaimOutcome, ClaimRecord, ListFilter, NewClaim, new_claim_id};
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
    waiters: Arc<Waiters>,
    /// Settles queued without a waiting caller (see [`super::background`]).
    pending: Arc<Pending>,
    /// The vault key results are sealed with (`at_rest.rs`), set once after opening.
    at_rest: OnceLock<AtRest>,
    /// Dropped with the store, which stops the cross-process poll.
    _stop_polling: oneshot::Sender<()>,
}

impl SqliteStore {
    /// Opens (creating and migrating as needed) the file at `path`; must run inside a Tokio runtime.
    pub(crate) async fn open(path: &Path) -> Result<SqliteStore, LedgerError> {
        Self::open_lingering(path, LINGER).await
    }

    /// [`SqliteStore::open`] with queued completions waiting at most `linger` for another job.
    pub(crate) async fn open_lingering(path: &Path, linger: Duration) -> Result<SqliteStore, LedgerError> {
        let worker = Worker::start(path.to_path_buf(), linger).await?;
        let (stop, stopped) = oneshot::channel();
        let waiters = Arc::new(Waiters::default());
        let inner =
            Arc::new(Inner { worker, waiters, pending: Arc::default(), at_rest: OnceLock::new(), _stop_polling: stop });
        tokio::spawn(poll_other_processes(Arc::downgrade(&inner), inner.waiters.clone(), stopped));
        Ok(SqliteStore { inner })
    }

    /// Seals results with `at_rest` from now on (the first call wins; a store opens with none).
    pub(crate) fn set_at_rest(&self, at_rest: AtRest) {
        let _ = self.inner.at_rest.set(at_rest);
    }

    pub(crate) fn at_rest(&self) -> Option<&AtRest> {
        self.inner.at_rest.get()
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
            .run_one(move |db| ops::claim(db, &new, id, now).map(|outcome| Delivery::new(outcome, abandon)));
        delivery.await?.take()
    }

    /// Releases a claim whose caller went away (see [`super::detach`]); runs on whatever thread drops it.
    fn abandon(&self) -> Abandon {
        let queue = self.inner.worker.queue().clone();
        Box::new(move |record: ClaimRecord| {
            let release = move |db: &mut worker::Db| {
                ops::settle(db, &record.key, &record.owner, Settle::Release, SystemTime::now())
            };
            let logged = |released: Result<(), LedgerError>| {
                if let Err(error) = released {
                    tracing::warn!(%error, "ledger: cannot release a claim whose caller went away");
                }
            };
            // A stopped worker has nothing left to do the job on; the claim then expires with its lease.
            let _ = queue.submit(release, logged);
        })
    }

    pub(crate) async fn complete(
        &self,
        key: &ClaimKey,
        owner: &str,
        result: &RawJson,
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
        self.inner.worker.run_one(move |db| job(db, &job_key, &owner, now)).await?;
        self.inner.waiters.wake(key.as_str());
        Ok(())
    }

    /// Parks `queued` for the worker's next batch and returns at once (see [`super::background`]); its waiters
    /// are woken once it committed. The parked job does not keep the store open: dropping the store applies it.
    pub(crate) fn settle_soon(&self, queued: QueuedSettle) {
        let (store, ticket, runtime) =
            (Arc::downgrade(&self.inner), self.inner.pending.ticket(), Handle::try_current().ok());
        let (queued, now) = (Arc::new(queued), SystemTime::now());
        let job = {
            let queued = queued.clone();
            move |db: &mut worker::Db| ops::settle(db, &queued.key, &queued.owner, queued.settle.as_settle(), now)
        };
        let answer = move |settled: Result<(), LedgerError>| {
            let store = store.upgrade().map(|inner| SqliteStore { inner });
            if let (Ok(()), Some(store)) = (&settled, &store) {
                store.inner.waiters.wake(queued.key.as_str());
            }
            background::finished(store, runtime, ticket, queued, settled);
        };
        self.inner.worker.park(job, answer);
    }

    /// What the worker did so far (see [`super::stats`]).
    pub(crate) fn stats(&self) -> WriterStats {
        self.inner.worker.stats()
    }

    /// How many batches (transactions) the worker ran.
    #[cfg(test)]
    pub(crate) fn batches(&self) -> u64 {
        self.stats().batches
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
        // Settles still queued are not leftovers: applied now, not after their linger.
        self.inner.worker.nudge();
        self.inner.pending.flushed().await;
        let owner = owner.to_owned();
        let now = SystemTime::now();
        let keys = self.inner.worker.run(move |db| ops::orphan(db, &owner, ORPHANED_NOTE, now)).await?;
        Ok(self.inner.waiters.wake_each(&keys))
    }

    pub(crate) async fn purge(&self, older_than: SystemTime) -> Result<u64, LedgerError> {
        purge_in_slices(|| self.inner.worker.run(move |db| ops::purge_slice(db, older_than))).await
    }

    pub(crate) async fn list(&self, filter: &ListFilter) -> Result<Vec<ClaimRecord>, LedgerError> {
        let filter = filter.clone();
        self.inner.worker.run(move |db| ops::list(db, &filter)).await
    }

    pub(crate) async fn resolve(&self, key: &ClaimKey, resolve: &Resolve, now: SystemTime) -> Result<(), LedgerError> {
        let (job_key, resolve) = (key.clone(), resolve.clone());
        self.inner.worker.run(move |db| ops::resolve(db, &job_key, &resolve, now)).await?;
        self.inner.waiters.wake(key.as_str());
        Ok(())
    }

    pub(crate) async fn resolutions(&self, pick: &Pick) -> Result<Vec<ResolutionRecord>, LedgerError> {
        let pick = pick.clone();
        self.inner.worker.run(move |db| ops::resolutions(db, &pick)).await
    }

    pub(crate) async fn ping(&self) -> Result<(), LedgerError> {
        self.inner.worker.run(|db| ops::ping(db)).await
    }
}

impl Resettle for SqliteStore {
    async fn settle_queued(&self, queued: &QueuedSettle) -> Result<(), LedgerError> {
        let settle = queued.settle.clone();
        self.settle(&queued.key, &queued.owner, move |db, key, owner, now| {
            ops::settle(db, key, owner, settle.as_settle(), now)
        })
        .await
    }
}

/// Wakes waiters whose claim another process settled; sleeps while nobody waits; ends when the store is dropped.
async fn poll_other_processes(inner: Weak<Inner>, waiters: Arc<Waiters>, mut stop: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            _ = &mut stop => return,
            () = waiters.watching() => {}
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(POLL_INTERVAL) => {}
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let watched = waiters.watched();
        if watched.is_empty() {
            continue;
        }
        // A failed poll is retried on the next round; the waiters' own reads report the error if it persists.
        if let Ok(settled) = inner.worker.run(move |db| ops::settled_among(db, watched)).await {
            for key in settled {
                waiters.wake(&key);
            }
        }
    }
}
