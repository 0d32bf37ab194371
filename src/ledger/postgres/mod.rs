//! The PostgreSQL store: one ledger shared by every replica of the gateway.
//!
//! Rules:
//! - Atomicity comes from PostgreSQL: each operation is one statement in autocommit (see [`ops`]).
//! - Queries go through a few reconnecting, pipelined connections ([`conn`]); notifications arrive on another,
//!   listening connection ([`listen`]). Waiters in this process are also woken directly after a local settle, so
//!   they do not wait for the notification's round trip.
//! - Claims and settles run on tasks of their own, so a caller that is dropped mid-operation neither cuts a
//!   settle short nor leaves behind a claim nobody knows it holds (see [`super::detach`]).
//! - TLS is not offered: connect over a trusted network or a local socket (`sslmode=require` fails to connect).

mod backend_tokens;
mod conn;
mod listen;
mod ops;
mod revocations;
mod schema;

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

use super::backend_tokens::BackendTokenSql;
use super::detach::{Abandon, Delivery, detached, spawn_release};
use super::digest::StoredResult;
use super::error::LedgerError;
use super::revocations::{FEED_CAPACITY, RevocationSql};
use super::rules::{EXPIRED_NOTE, ORPHANED_NOTE, Settle};
use super::sql::{Dialect, Statements};
use super::types::{ClaimKey, ClaimOutcome, ClaimRecord, ListFilter, NewClaim, Resolution, new_claim_id};
use super::waiters::Waiters;
use crate::ledger_url::PostgresUrl;
use conn::Connector;

#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Connector,
    waiters: Arc<Waiters>,
    revocation_sql: RevocationSql,
    backend_token_sql: BackendTokenSql,
    /// Announces revocations to this store's subscribers (see [`revocations`]).
    revocations: broadcast::Sender<super::RevocationEvent>,
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
        let config = conn::driver_config(&url.connect)?;
        let names = schema::Names::new(url.schema.as_deref());
        let mut client = conn::connect(&config).await.map_err(conn::Failure::from)?;
        schema::migrate(&mut client, &names).await?;
        let conn = Connector::new(config.clone(), Statements::new(&names.claims, Dialect::Postgres), client).await?;
        let waiters = Arc::new(Waiters::default());
        let (stop, stopped) = oneshot::channel();
        let revocation_sql = RevocationSql::new(&names.revocations, Dialect::Postgres, &names.revoked_channel);
        let (revocations, _) = broadcast::channel(FEED_CAPACITY);
        let backend_token_sql = BackendTokenSql::new(&names.backend_tokens, Dialect::Postgres);
        let listeners = listen::Listeners {
            settled: names.channel,
            waiters: waiters.clone(),
            revoked: names.revoked_channel,
            revocations: revocations.clone(),
        };
        tokio::spawn(listen::run(config, listeners, stopped));
        let inner = Inner { conn, waiters, revocation_sql, backend_token_sql, revocations, _stop_listening: stop };
        Ok(PostgresStore { inner: Arc::new(inner) })
    }

    pub(crate) fn waiters(&self) -> &Waiters {
        &self.inner.waiters
    }

    pub(crate) async fn claim(&self, new: NewClaim) -> Result<ClaimOutcome, LedgerError> {
        // Chosen once, so a retry after a broken connection recognises its own insert.
        let (id, now) = (new_claim_id()?, SystemTime::now());
        let (store, abandon) = (self.clone(), self.abandon());
        let delivery = detached(async move {
            let (new, id) = (&new, id.as_str());
            let outcome = store.inner.conn.run(|session| async move { ops::claim(&session, new, id, now).await });
            Ok(Delivery::new(outcome.await?, abandon))
        });
        delivery.await?.take()
    }

    /// Releases a claim whose caller went away (see [`super::detach`]).
    fn abandon(&self) -> Abandon {
        let store = self.clone();
        Box::new(move |record: ClaimRecord| {
            spawn_release(async move { store.release(&record.key, &record.owner).await });
        })
    }

    // The settles below run detached: once started they finish, even if their caller is dropped.

    pub(crate) async fn complete(
        &self,
        key: &ClaimKey,
        owner: &str,
        result: &Value,
        max_result: usize,
    ) -> Result<(), LedgerError> {
        let stored = StoredResult::bound(result, max_result);
        let (store, key, owner) = (self.clone(), key.clone(), owner.to_owned());
        detached(async move { store.settle(&key, &owner, Settle::Complete(&stored)).await }).await
    }

    pub(crate) async fn mark_unknown(&self, key: &ClaimKey, owner: &str, error: &str) -> Result<(), LedgerError> {
        let (store, key, owner, error) = (self.clone(), key.clone(), owner.to_owned(), error.to_owned());
        detached(async move { store.settle(&key, &owner, Settle::MarkUnknown(&error)).await }).await
    }

    pub(crate) async fn release(&self, key: &ClaimKey, owner: &str) -> Result<(), LedgerError> {
        let (store, key, owner) = (self.clone(), key.clone(), owner.to_owned());
        detached(async move { store.settle(&key, &owner, Settle::Release).await }).await
    }

    async fn settle(&self, key: &ClaimKey, owner: &str, operation: Settle<'_>) -> Result<(), LedgerError> {
        let now = SystemTime::now();
        self.inner.conn.run(|session| async move { ops::settle(&session, key, owner, operation, now).await }).await?;
        self.inner.waiters.wake(key.as_str());
        Ok(())
    }

    pub(crate) async fn get(&self, key: &ClaimKey) -> Result<Option<ClaimRecord>, LedgerError> {
        self.inner.conn.run(|session| async move { ops::get(&session, key.as_str()).await }).await
    }

    pub(crate) async fn renew_leases(&self, owner: &str, lease_until: SystemTime) -> Result<u64, LedgerError> {
        self.inner.conn.run(|session| async move { ops::renew(&session, owner, lease_until).await }).await
    }

    pub(crate) async fn expire_leases(&self, now: SystemTime) -> Result<u64, LedgerError> {
        let keys = self.inner.conn.run(|session| async move { ops::expire(&session, now, EXPIRED_NOTE).await }).await?;
        Ok(self.inner.waiters.wake_each(&keys))
    }

    pub(crate) async fn orphan(&self, owner: &str) -> Result<u64, LedgerError> {
        let now = SystemTime::now();
        let keys = self
            .inner
            .conn
            .run(|session| async move { ops::orphan(&session, owner, ORPHANED_NOTE, now).await })
            .await?;
        Ok(self.inner.waiters.wake_each(&keys))
    }

    pub(crate) async fn purge(&self, older_than: SystemTime) -> Result<u64, LedgerError> {
        self.inner.conn.run(|session| async move { ops::purge(&session, older_than).await }).await
    }

    pub(crate) async fn list(&self, filter: &ListFilter) -> Result<Vec<ClaimRecord>, LedgerError> {
        self.inner.conn.run(|session| async move { ops::list(&session, filter).await }).await
    }

    pub(crate) async fn resolve(&self, key: &ClaimKey, resolution: Resolution) -> Result<(), LedgerError> {
        let (store, key, now) = (self.clone(), key.clone(), SystemTime::now());
        detached(async move {
            let key = &key;
            store.inner.conn.run(|session| async move { ops::resolve(&session, key, resolution, now).await }).await?;
            store.inner.waiters.wake(key.as_str());
            Ok(())
        })
        .await
    }

    pub(crate) async fn ping(&self) -> Result<(), LedgerError> {
        self.inner.conn.run(|session| async move { ops::ping(&session).await }).await
    }
}
