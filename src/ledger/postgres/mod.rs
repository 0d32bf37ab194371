//! The PostgreSQL store: one ledger shared by every replica of the gateway.
//!
//! Rules:
//! - Atomicity comes from PostgreSQL: each operation is one statement (see [`ops`]); claims and settles that
//!   arrive together share one pipelined transaction, one round trip per batch ([`batch`]). A completion nobody
//!   waits for ([`PostgresStore::settle_soon`]) is parked and rides with the next batch, or goes on its own once
//!   it waited [`LINGER`] (see [`super::background`]).
//! - Queries go through a few reconnecting, pipelined connections ([`conn`]); notifications arrive on another,
//!   listening connection ([`listen`]). Waiters in this process are also woken directly after a local settle
//!   commits, so they do not wait for the notification's round trip.
//! - Claims and settles are jobs for the batch writers: once queued they run even if their caller is dropped,
//!   so a dropped caller neither cuts a settle short nor leaves behind a claim nobody knows it holds (see
//!   [`super::detach`]).
//! - TLS is not offered: connect over a trusted network or a local socket (`sslmode=require` fails to connect).

/// Reads columns `0..` of `row` into a tuple (its type says each column's), or fails as an unreadable row of
/// `what`; the stores keep their rows' readers in `ledger::*` as plain tuples of columns.
macro_rules! row_columns {
    ($row:expr, $what:literal, $($index:literal),+ $(,)?) => {
        ($($row.try_get($index).map_err(|error: tokio_postgres::Error| {
            LedgerError::corrupt(format!(concat!("unreadable ", $what, " row: {}"), error))
        })?,)+)
    };
}

mod approvals;
mod backend_tokens;
mod batch;
mod bus;
mod conn;
mod limit_counters;
mod listen;
mod ops;
mod pins;
mod revocations;
mod rows;
mod schema;
mod tasks;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use tokio::sync::{broadcast, oneshot};

use crate::raw_json::RawJson;

use super::announcements::AnnouncementSql;
use super::approvals::ApprovalSql;
use super::at_rest::AtRest;
use super::backend_tokens::BackendTokenSql;
use super::background::{self, LINGER, Pending, QueuedSettle, Resettle};
use super::detach::{Abandon, Delivery, detached, spawn_release};
use super::digest::StoredResult;
use super::error::LedgerError;
use super::limit_counters::LimitCounterSql;
use super::pins::PinSql;
use super::resolutions::{Pick, ResolutionRecord, ResolutionSql, Resolve};
use super::revocations::{FEED_CAPACITY, RevocationSql};
use super::rules::{EXPIRED_NOTE, ORPHANED_NOTE, OwnedSettle};
use super::sql::{Dialect, purge_in_slices};
use super::stats::WriterStats;
use super::tasks::TaskSql;
use super::types::{ClaimKey, ClaimOutcome, ClaimRecord, ListFilter, NewClaim, new_claim_id};
use super::waiters::Waiters;
use crate::ledger_url::PostgresUrl;
use batch::{Job, Writers};
pub(crate) use bus::PgBus;
use conn::Connector;

#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Arc<Connector>,
    writers: Writers,
    waiters: Arc<Waiters>,
    /// Settles queued without a waiting caller (see [`super::background`]).
    pending: Arc<Pending>,
    revocation_sql: RevocationSql,
    backend_token_sql: BackendTokenSql,
    approval_sql: ApprovalSql,
    limit_counter_sql: LimitCounterSql,
    pin_sql: PinSql,
    task_sql: TaskSql,
    /// Fails the working tasks of instances whose leases expired (see [`tasks`]).
    abandon_sql: String,
    resolution_sql: ResolutionSql,
    announcement_sql: AnnouncementSql,
    /// Announces revocations to this store's subscribers (see [`revocations`]).
    revocations: broadcast::Sender<super::RevocationEvent>,
    /// The vault key results are sealed with (`at_rest.rs`), set once after opening.
    at_rest: OnceLock<AtRest>,
    /// How to connect: the fleet bus listens on a connection of its own.
    config: tokio_postgres::Config,
    /// The fleet bus's channel prefix, mailboxes and replicas (see [`bus`]).
    fleet_channel: String,
    fleet_mail: String,
    fleet_replicas: String,
    /// The shared stream events' table (see [`bus`]).
    stream_events: String,
    /// Dropped with the store, which stops the listening task.
    _stop_listening: oneshot::Sender<()>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects, creates or checks the schema, and starts listening for settled claims.
    pub(crate) async fn open(url: &PostgresUrl) -> Result<PostgresStore, LedgerError> {
        Self::open_lingering(url, LINGER).await
    }

    /// [`PostgresStore::open`] with queued completions waiting at most `linger` for another job.
    pub(crate) async fn open_lingering(url: &PostgresUrl, linger: Duration) -> Result<PostgresStore, LedgerError> {
        let config = conn::driver_config(&url.connect)?;
        let names = schema::Names::new(url.schema.as_deref());
        let mut client = conn::connect(&config).await.map_err(conn::Failure::from)?;
        schema::migrate(&mut client, &names).await?;
        let conn = Connector::new(config.clone(), &names.claims, client).await?;
        let conn = Arc::new(conn);
        let writers = Writers::start(conn.clone(), linger);
        let waiters = Arc::new(Waiters::default());
        let (stop, stopped) = oneshot::channel();
        let revocation_sql = RevocationSql::new(&names.revocations, Dialect::Postgres, &names.revoked_channel);
        let (revocations, _) = broadcast::channel(FEED_CAPACITY);
        let backend_token_sql = BackendTokenSql::new(&names.backend_tokens, Dialect::Postgres);
        let approval_sql = ApprovalSql::new(&names.approvals, Dialect::Postgres);
        let limit_counter_sql = LimitCounterSql::new(&names.limit_counters, Dialect::Postgres);
        let pin_sql = PinSql::new(&names.pins, Dialect::Postgres);
        let task_sql = TaskSql::new(&names.tasks, Dialect::Postgres);
        let abandon_sql = tasks::abandon_statement(&names.tasks, &names.claims);
        let resolution_sql = ResolutionSql::new(&names.claims, &names.resolutions, Dialect::Postgres);
        let announcement_sql = AnnouncementSql::new(&names.announcements, Dialect::Postgres);
        let listeners = listen::Listeners {
            settled: names.channel,
            waiters: waiters.clone(),
            revoked: names.revoked_channel,
            revocations: revocations.clone(),
        };
        tokio::spawn(listen::run(config.clone(), listeners, stopped));
        let pending = Arc::default();
        let inner = Inner {
            conn,
            writers,
            waiters,
            pending,
            revocation_sql,
            backend_token_sql,
            approval_sql,
            limit_counter_sql,
            pin_sql,
            task_sql,
            abandon_sql,
            resolution_sql,
            announcement_sql,
            revocations,
            at_rest: OnceLock::new(),
            config,
            fleet_channel: names.fleet_channel,
            fleet_mail: names.fleet_mail,
            fleet_replicas: names.fleet_replicas,
            stream_events: names.stream_events,
            _stop_listening: stop,
        };
        Ok(PostgresStore { inner: Arc::new(inner) })
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
        // Chosen once, so a batch run again after a broken connection recognises its own insert.
        let (id, now) = (new_claim_id()?, SystemTime::now());
        let (reply, answer) = oneshot::channel();
        let abandon = self.abandon();
        // A caller gone by now drops the delivery, which releases the claim.
        let reply = Box::new(move |outcome: Result<ClaimOutcome, LedgerError>| {
            drop(reply.send(outcome.map(|outcome| Delivery::new(outcome, abandon))));
        });
        self.inner.writers.submit(Job::Claim { new, id, now, reply: batch::Answer::new(reply) });
        let delivery = answer.await.map_err(|_| LedgerError::unavailable("the ledger's writer stopped"))??;
        delivery.take()
    }

    /// Releases a claim whose caller went away (see [`super::detach`]).
    fn abandon(&self) -> Abandon {
        let store = self.clone();
        Box::new(move |record: ClaimRecord| {
            spawn_release(async move { store.release(&record.key, &record.owner).await });
        })
    }

    pub(crate) async fn complete(
        &self,
        key: &ClaimKey,
        owner: &str,
        result: &RawJson,
        max_result: usize,
    ) -> Result<(), LedgerError> {
        self.settle(key, owner, OwnedSettle::Complete(StoredResult::bound(result, max_result))).await
    }

    pub(crate) async fn mark_unknown(&self, key: &ClaimKey, owner: &str, error: &str) -> Result<(), LedgerError> {
        self.settle(key, owner, OwnedSettle::MarkUnknown(error.to_owned())).await
    }

    pub(crate) async fn release(&self, key: &ClaimKey, owner: &str) -> Result<(), LedgerError> {
        self.settle(key, owner, OwnedSettle::Release).await
    }

    async fn settle(&self, key: &ClaimKey, owner: &str, settle: OwnedSettle) -> Result<(), LedgerError> {
        let queued = Arc::new(QueuedSettle { key: key.clone(), owner: owner.to_owned(), settle });
        let (reply, answer) = oneshot::channel();
        self.inner.writers.submit(self.settle_job(queued, Box::new(move |settled| drop(reply.send(settled)))));
        answer.await.map_err(|_| LedgerError::unavailable("the ledger's writer stopped"))?
    }

    /// Parks `queued` for the writers' next batch and returns at once (see [`super::background`]). The parked
    /// job does not keep the store open: dropping the store applies it.
    pub(crate) fn settle_soon(&self, queued: QueuedSettle) {
        let (store, ticket, runtime) =
            (Arc::downgrade(&self.inner), self.inner.pending.ticket(), tokio::runtime::Handle::try_current());
        let queued = Arc::new(queued);
        let retry = queued.clone();
        let done = move |settled: Result<(), LedgerError>| {
            let store = store.upgrade().map(|inner| PostgresStore { inner });
            background::finished(store, runtime.ok(), ticket, retry, settled);
        };
        self.inner.writers.park(self.settle_job(queued, Box::new(done)));
    }

    /// A settle job whose waiters are woken once it committed, then `reply` answered.
    fn settle_job(&self, queued: Arc<QueuedSettle>, reply: batch::SettleReply) -> Job {
        let (waiters, key) = (self.inner.waiters.clone(), queued.key.clone());
        let reply = Box::new(move |settled: Result<(), LedgerError>| {
            if settled.is_ok() {
                waiters.wake(key.as_str());
            }
            reply(settled);
        });
        Job::Settle { queued, now: SystemTime::now(), reply: batch::Answer::new(reply) }
    }

    /// What the writers did so far (see [`super::stats`]).
    pub(crate) fn stats(&self) -> WriterStats {
        self.inner.writers.stats()
    }

    /// How many batches the writers ran.
    #[cfg(test)]
    pub(crate) fn batches(&self) -> u64 {
        self.stats().batches
    }

    pub(crate) async fn get(&self, key: &ClaimKey) -> Result<Option<ClaimRecord>, LedgerError> {
        self.inner.conn.run(|session| async move { ops::get(&session, key.as_str()).await }).await
    }

    /// Marks the claim `key` waited for while it is in flight, so that its settle wakes this replica's waiter
    /// whichever replica settles it (see [`schema`]).
    pub(crate) async fn watch(&self, key: &ClaimKey) -> Result<(), LedgerError> {
        self.inner.conn.run(|session| async move { ops::watch(&session, key.as_str()).await }).await
    }

    pub(crate) async fn renew_leases(&self, owner: &str, lease_until: SystemTime) -> Result<u64, LedgerError> {
        self.inner.conn.run(|session| async move { ops::renew(&session, owner, lease_until).await }).await
    }

    pub(crate) async fn expire_leases(&self, now: SystemTime) -> Result<u64, LedgerError> {
        let keys = self.inner.conn.run(|session| async move { ops::expire(&session, now, EXPIRED_NOTE).await }).await?;
        // The claims are settled either way: a failure here leaves the tasks to their ttl, and is only logged.
        match self.abandon_tasks(&keys, now).await {
            Ok(0) => {}
            Ok(failed) => tracing::warn!(failed, "ledger: tasks of a stopped instance failed (unknown)"),
            Err(error) => tracing::warn!(%error, "ledger: cannot fail the tasks of a stopped instance"),
        }
        Ok(self.inner.waiters.wake_each(&keys))
    }

    pub(crate) async fn orphan(&self, owner: &str) -> Result<u64, LedgerError> {
        // Settles still queued are not leftovers: applied now, not after their linger.
        self.inner.writers.nudge();
        self.inner.pending.flushed().await;
        let now = SystemTime::now();
        let keys = self
            .inner
            .conn
            .run(|session| async move { ops::orphan(&session, owner, ORPHANED_NOTE, now).await })
            .await?;
        Ok(self.inner.waiters.wake_each(&keys))
    }

    pub(crate) async fn purge(&self, older_than: SystemTime) -> Result<u64, LedgerError> {
        let slice = || self.inner.conn.run(|session| async move { ops::purge_slice(&session, older_than).await });
        purge_in_slices(slice).await
    }

    pub(crate) async fn list(&self, filter: &ListFilter) -> Result<Vec<ClaimRecord>, LedgerError> {
        self.inner.conn.run(|session| async move { ops::list(&session, filter).await }).await
    }

    pub(crate) async fn resolve(&self, key: &ClaimKey, resolve: &Resolve, now: SystemTime) -> Result<(), LedgerError> {
        let (store, key, resolve) = (self.clone(), key.clone(), resolve.clone());
        detached(async move {
            let (key, resolve, sql) = (&key, &resolve, &store.inner.resolution_sql);
            store.inner.conn.run(|session| async move { ops::resolve(&session, sql, key, resolve, now).await }).await?;
            store.inner.waiters.wake(key.as_str());
            Ok(())
        })
        .await
    }

    pub(crate) async fn resolutions(&self, pick: &Pick) -> Result<Vec<ResolutionRecord>, LedgerError> {
        let sql = &self.inner.resolution_sql;
        self.inner.conn.run(|session| async move { ops::resolutions(&session, sql, pick).await }).await
    }

    pub(crate) async fn ping(&self) -> Result<(), LedgerError> {
        self.inner.conn.run(|session| async move { ops::ping(&session).await }).await
    }
}

impl Resettle for PostgresStore {
    async fn settle_queued(&self, queued: &QueuedSettle) -> Result<(), LedgerError> {
        self.settle(&queued.key, &queued.owner, queued.settle.clone()).await
    }
}
