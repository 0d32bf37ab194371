//! The call ledger: the store layer of the at-most-once guarantee. Every `tools/call` is claimed here
//! before a byte goes to a backend, and settled here afterwards; a second call with the same key finds the claim
//! and is answered from it instead of running the tool again.
//!
//! Rules:
//! - One type, [`LedgerStore`], over three stores with identical behaviour (one test suite runs against all):
//!   memory (tests, demos), SQLite (the embedded default) and PostgreSQL (shared by replicas).
//! - Every operation is atomic in the store, also across processes; the state machine is written once, in
//!   [`rules`], and the SQL stores encode it in the `WHERE` clause of single statements (see [`sql`]).
//! - Fail closed: every failure is a [`LedgerError`]; nothing here panics or reports success it did not have.
//! - Only the owning instance settles a claim ([`LedgerStore::complete`], [`LedgerStore::mark_unknown`],
//!   [`LedgerStore::release`]); an operator settles `unknown` claims with [`LedgerStore::resolve`].
//! - Single flight: [`LedgerStore::wait_settled`] returns as soon as a claim leaves `in_flight` durably, woken
//!   in-process directly, across processes by PostgreSQL `LISTEN/NOTIFY` or (SQLite) a light poll that runs only
//!   while someone waits.
//! - Group commit: the SQL stores' writers take every job queued when they wake (sleeping on their queue, never
//!   polling) and commit them in one transaction, answering each after the commit; one job's failure is its own.
//! - A call's completion need not be awaited ([`LedgerStore::settle_soon`]): the claim is durable before the
//!   call is sent, and stays `in_flight` until the completion is, which is all at most once needs. The SQL stores
//!   let it linger (a few ms at most) for the next job, so a quiet call costs one writer wake-up and one commit.
//! - Owner ids must be stable across restarts of one instance ([`instance_id`] keeps one in the data
//!   directory), so that [`LedgerStore::orphan`] finds the claims a crashed run left behind.
//! - The store also keeps the revocation log of deleted agent sessions ([`Revocation`]; see `revocations.rs`),
//!   on plain types, beside the claims, and the backend OAuth tokens ([`BackendTokenRow`], sealed by their owner;
//!   see `backend_tokens.rs`), the approval requests of calls waiting for a person ([`ApprovalRow`], keyed by
//!   the call's claim key; see `approvals.rs`), the limit counters replicas share ([`CounterRow`]; see
//!   `limit_counters.rs`), the pinned tool definitions ([`PinRow`]; see `pins.rs`), the tasks agents run
//!   tool calls as ([`TaskRow`]; see `tasks.rs`), and the marks of operators' decisions already announced
//!   ([`Announced`]; see `announcements.rs`).
//! - Results at rest: a SQL store given the vault key ([`LedgerStore::seal_results`]) seals new results and
//!   opens sealed ones on every read, here in the facade, so the stores keep text they need not understand and
//!   plaintext rows written before keep replaying (`at_rest.rs`). The memory store never persists and seals nothing.
//!   tool calls as ([`TaskRow`]; see `tasks.rs`). On PostgreSQL it also carries the fleet bus between replicas
//!   ([`FleetBus`]; see `fleet.rs`) and the shared stream events.

mod at_rest;
mod background;
mod detach;
mod digest;
mod error;
mod fleet;
mod instance;
mod maintenance;
mod memory;
mod postgres;
mod rules;
mod sql;
mod sqlite;
mod stats;
mod types;
mod waiters;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::time::SystemTime;

use tokio::time::Instant;

use crate::raw_json::RawJson;

pub use crate::ledger_url::{LedgerUrl, PostgresUrl, SQLITE_FILE_NAME};
pub use announcements::Announced;
pub use approvals::{ApprovalRequest, ApprovalRow, ApprovalState, Decision, MAX_NOTE};
pub use backend_tokens::{BackendTokenRow, TokenFilter};
pub use digest::{canonical_digest, canonical_json};
pub use error::LedgerError;
pub use fleet::{FleetBus, Heard, StreamEvent};
pub use instance::instance_id;
pub use limit_counters::{CounterRow, LimitCounter};
pub use maintenance::{Maintenance, maintain};
pub use memory::MemoryStore;
pub use pins::{PinKey, PinOffer, PinRow, PinState};
pub use postgres::PostgresStore;
pub use resolutions::{ResolutionRecord, Resolve};
pub use revocations::{MAX_SESSION_LEN, Revocation, RevocationEvent, RevocationFeed};
pub use sqlite::SqliteStore;
pub use stats::WriterStats;
pub use tasks::{RUNNING_STATES, TaskEnd, TaskFilter, TaskRow};
pub use types::{
    CallMismatch, ClaimKey, ClaimOutcome, ClaimRecord, ClaimState, ListFilter, NewClaim, OPERATOR, Resolution,
    Settlement, WaitOutcome,
};

use at_rest::AtRest;
use background::QueuedSettle;
use resolutions::Pick;
use waiters::Waiters;

/// A ledger store. Cloning is cheap and clones share the store (connection, thread, waiters).
#[derive(Debug, Clone)]
pub enum LedgerStore {
    Memory(MemoryStore),
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

/// Calls the same method on whichever store `self` is.
macro_rules! dispatch {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {
        match $self {
            LedgerStore::Memory(store) => store.$method($($arg),*).await,
            LedgerStore::Sqlite(store) => store.$method($($arg),*).await,
            LedgerStore::Postgres(store) => store.$method($($arg),*).await,
        }
    };
}

// Declared after `dispatch!` so the modules can use it.
mod announcements;
mod approvals;
mod backend_tokens;
mod limit_counters;
mod pins;
mod resolutions;
mod revocations;
mod tasks;

impl LedgerStore {
    /// Opens the store `url` names (see [`LedgerUrl`]), creating and migrating its schema; `data_dir` holds the
    /// default SQLite file. Must run inside a Tokio runtime (stores start background tasks).
    pub async fn open(url: &str, data_dir: &Path) -> Result<LedgerStore, LedgerError> {
        Self::open_url(&LedgerUrl::parse(url)?, data_dir).await
    }

    /// [`LedgerStore::open`] for an already parsed URL (as the configuration holds it).
    pub async fn open_url(url: &LedgerUrl, data_dir: &Path) -> Result<LedgerStore, LedgerError> {
        match url {
            LedgerUrl::Memory => Ok(Self::memory()),
            LedgerUrl::SqliteInDataDir | LedgerUrl::Sqlite(_) => {
                let path = url.sqlite_path(data_dir).unwrap_or_else(|| data_dir.join(SQLITE_FILE_NAME));
                SqliteStore::open(&path).await.map(LedgerStore::Sqlite)
            }
            LedgerUrl::Postgres(postgres) => PostgresStore::open(postgres).await.map(LedgerStore::Postgres),
        }
    }

    /// A new, empty in-memory store.
    pub fn memory() -> LedgerStore {
        LedgerStore::Memory(MemoryStore::default())
    }

    /// `"memory"`, `"sqlite"` or `"postgres"`, for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            LedgerStore::Memory(_) => "memory",
            LedgerStore::Sqlite(_) => "sqlite",
            LedgerStore::Postgres(_) => "postgres",
        }
    }

    fn waiters(&self) -> &Waiters {
        match self {
            LedgerStore::Memory(store) => store.waiters(),
            LedgerStore::Sqlite(store) => store.waiters(),
            LedgerStore::Postgres(store) => store.waiters(),
        }
    }

    /// From now on, opens sealed results with the vault `key` and, when `seal_new`, seals new ones with it
    /// (`[ledger] encrypt_results`); nothing for the memory store, which never persists.
    pub fn seal_results(&self, key: &[u8; 32], seal_new: bool) {
        match self {
            LedgerStore::Memory(_) => {}
            LedgerStore::Sqlite(store) => store.set_at_rest(AtRest::new(key, seal_new)),
            LedgerStore::Postgres(store) => store.set_at_rest(AtRest::new(key, seal_new)),
        }
    }

    fn at_rest(&self) -> Option<&AtRest> {
        match self {
            LedgerStore::Memory(_) => None,
            LedgerStore::Sqlite(store) => store.at_rest(),
            LedgerStore::Postgres(store) => store.at_rest(),
        }
    }

    /// `record` as it was completed: its result opened when it is sealed.
    fn opened(&self, record: ClaimRecord) -> Result<ClaimRecord, LedgerError> {
        at_rest::open(self.at_rest(), record)
    }

    /// `result` sealed for the store, when results are sealed and it is small enough to keep whole (the store
    /// then keeps it without bounding it again).
    fn sealed(&self, key: &ClaimKey, result: &RawJson, max_result: usize) -> Result<Option<RawJson>, LedgerError> {
        self.at_rest().map_or(Ok(None), |at_rest| at_rest.seal(key, result, max_result))
    }

    /// Claims `new.key` for `new.owner` unless a claim with that key exists: [`ClaimOutcome::Claimed`] means the
    /// call may be sent, [`ClaimOutcome::Existing`] returns the claim that is already there.
    pub async fn claim(&self, new: NewClaim) -> Result<ClaimOutcome, LedgerError> {
        match dispatch!(self.claim(new))? {
            ClaimOutcome::Existing(record) => self.opened(record).map(ClaimOutcome::Existing),
            claimed => Ok(claimed),
        }
    }

    /// Settles the owner's claim as completed with `result`, or with only its digest when its JSON text is longer
    /// than `max_result` bytes. Completing again with the same result is accepted.
    pub async fn complete(
        &self,
        key: &ClaimKey,
        owner: &str,
        result: &RawJson,
        max_result: usize,
    ) -> Result<(), LedgerError> {
        match self.sealed(key, result, max_result)? {
            Some(sealed) => dispatch!(self.complete(key, owner, &sealed, usize::MAX)),
            None => dispatch!(self.complete(key, owner, result, max_result)),
        }
    }

    /// Settles the owner's claim as `settlement` says without waiting for the store: the settle joins the
    /// writer's next batch (waiting up to `background::LINGER` for one), and the claim's waiters are woken once it
    /// is durable. Until then the claim stays
    /// durably `in_flight`, so a duplicate waits for it and a crash leaves it to become `unknown` (see
    /// docs/ledger.md, *The completion is off the agent's path*). A settle the store cannot take is retried in
    /// the background; one the rules refuse is logged. The memory store settles at once.
    pub fn settle_soon(&self, key: &ClaimKey, owner: &str, settlement: Settlement, max_result: usize) {
        let (settlement, max_result) = match &settlement {
            Settlement::Completed(result) => match self.sealed(key, result, max_result) {
                Ok(None) => (settlement, max_result),
                Ok(Some(sealed)) => (Settlement::Completed(sealed), usize::MAX),
                // Fail closed: what ran is not stored in the clear; the claim says its outcome is unknown.
                Err(error) => (Settlement::Unknown(error.to_string()), max_result),
            },
            _ => (settlement, max_result),
        };
        match self {
            LedgerStore::Memory(store) => {
                if let Err(error) = store.settle_now(key, owner, settlement, max_result) {
                    background::refused(key, &error);
                }
            }
            LedgerStore::Sqlite(store) => store.settle_soon(QueuedSettle::new(key, owner, &settlement, max_result)),
            LedgerStore::Postgres(store) => store.settle_soon(QueuedSettle::new(key, owner, &settlement, max_result)),
        }
    }

    /// Settles the owner's claim as unknown (the call may have run), recording `error`.
    pub async fn mark_unknown(&self, key: &ClaimKey, owner: &str, error: &str) -> Result<(), LedgerError> {
        dispatch!(self.mark_unknown(key, owner, error))
    }

    /// Deletes the owner's claim so the call may run again. Only for calls proven not delivered
    /// (`McpError::NotDelivered`); releasing a claim that is already gone is accepted.
    pub async fn release(&self, key: &ClaimKey, owner: &str) -> Result<(), LedgerError> {
        dispatch!(self.release(key, owner))
    }

    pub async fn get(&self, key: &ClaimKey) -> Result<Option<ClaimRecord>, LedgerError> {
        dispatch!(self.get(key))?.map(|record| self.opened(record)).transpose()
    }

    /// Extends the lease of every in-flight claim of `owner` to `lease_until`; returns how many.
    pub async fn renew_leases(&self, owner: &str, lease_until: SystemTime) -> Result<u64, LedgerError> {
        dispatch!(self.renew_leases(owner, lease_until))
    }

    /// Marks every in-flight claim whose lease ended before `now` unknown (its owner died); returns how many.
    pub async fn expire_leases(&self, now: SystemTime) -> Result<u64, LedgerError> {
        dispatch!(self.expire_leases(now))
    }

    /// At start: marks the in-flight claims `owner` left behind when it last stopped unknown; returns how many.
    /// At shutdown the same, after the settles queued by [`LedgerStore::settle_soon`] had their first attempt.
    /// Logs (debug) what the writers did so far, once they did anything: at shutdown, the run's totals.
    pub async fn orphan(&self, owner: &str) -> Result<u64, LedgerError> {
        let orphaned = dispatch!(self.orphan(owner));
        let stats = self.writer_stats();
        if stats.batches > 0 {
            tracing::debug!(store = self.kind(), "ledger writers: {stats}");
        }
        orphaned
    }

    /// What the store's writers did since it opened: batches, their sizes, waits and commits (see
    /// `ledger/stats.rs`); all zero for the memory store.
    pub fn writer_stats(&self) -> WriterStats {
        match self {
            LedgerStore::Memory(_) => WriterStats::default(),
            LedgerStore::Sqlite(store) => store.stats(),
            LedgerStore::Postgres(store) => store.stats(),
        }
    }

    /// Deletes completed and unknown claims last changed before `older_than`; returns how many.
    pub async fn purge(&self, older_than: SystemTime) -> Result<u64, LedgerError> {
        dispatch!(self.purge(older_than))
    }

    /// The claims matching `filter`, newest first.
    pub async fn list(&self, filter: &ListFilter) -> Result<Vec<ClaimRecord>, LedgerError> {
        dispatch!(self.list(filter))?.into_iter().map(|record| self.opened(record)).collect()
    }

    /// An operator settles an `unknown` claim: [`Resolution::Completed`] makes it completed (owner
    /// [`OPERATOR`], no result, a note in `error`) so retries are answered without running;
    /// [`Resolution::Failed`] deletes it so a retry runs the call. Either way the call's history gains a
    /// [`ResolutionRecord`] (who, when, the note, the call as it stood), in the same atomic step.
    pub async fn resolve(&self, key: &ClaimKey, resolve: &Resolve) -> Result<(), LedgerError> {
        resolve.check()?;
        dispatch!(self.resolve(key, resolve, types::truncate_to_millis(SystemTime::now())))
    }

    /// The resolutions recorded for `key`, oldest first.
    pub async fn resolutions(&self, key: &ClaimKey) -> Result<Vec<ResolutionRecord>, LedgerError> {
        dispatch!(self.resolutions(&Pick::Key(key.as_str().to_owned())))
    }

    /// Every call's resolutions recorded at or after `since`, oldest first (for the gateways to announce those
    /// taken elsewhere; see `announcements.rs`).
    pub async fn resolutions_since(&self, since: SystemTime) -> Result<Vec<ResolutionRecord>, LedgerError> {
        dispatch!(self.resolutions(&Pick::Since(types::to_millis(since))))
    }

    /// Whether the store answers (for `/readyz`).
    pub async fn ping(&self) -> Result<(), LedgerError> {
        dispatch!(self.ping())
    }

    /// Waits until the claim `key` leaves `in_flight` or `deadline` passes (single flight for duplicates).
    pub async fn wait_settled(&self, key: &ClaimKey, deadline: Instant) -> Result<WaitOutcome, LedgerError> {
        // On PostgreSQL only the claims a waiter marked announce their settles to the other replicas (see
        // `postgres/schema.rs`). Marked once, before the first read: a settle after the mark is announced, one
        // before it is found by that read. Another process's settle reaches a SQLite waiter by its poll.
        if let LedgerStore::Postgres(store) = self {
            store.watch(key).await?;
        }
        self.waiters().wait_settled(key, deadline, || self.get(key)).await
    }
}
